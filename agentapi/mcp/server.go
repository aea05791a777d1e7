package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// Session modes.
const (
	// SessionPerConnection gives each MCP connection one nsbox session,
	// created on first use and deleted when the connection ends: state
	// persists across calls like a notebook.
	SessionPerConnection = "per-connection"
	// SessionPerCall runs every run tool's and run_shell's call in a
	// fresh one-shot sandbox; the file tools and reset_session are not offered.
	SessionPerCall = "per-call"
)

// Config configures a Server.
type Config struct {
	// Client reaches the daemon; nil means the default socket.
	Client *client.Client
	// Rootfs names the sandboxes' root filesystem; empty: the daemon's default.
	Rootfs string
	// Limits bound each session (or, per call, each run). TimeoutMs is the
	// default timeout of one call; OutputBytes the output kept per stream
	// (0: 128 KiB, to keep results fit for a model's context).
	Limits agentapi.Limits
	// IdleTimeout ends an unused session; 0 means the daemon's default.
	IdleTimeout time.Duration
	// SessionMode is SessionPerConnection (default) or SessionPerCall.
	SessionMode string
	// Version is reported to MCP clients.
	Version string
	// Logger logs sessions created and deleted; nil discards.
	Logger *slog.Logger
	// Info is the daemon's GET /v1/info at start-up: the tool descriptions
	// then name the rootfs, its data-science modules and the limits a call
	// gets. nil: they speak of them in general.
	Info *agentapi.Info
	// Languages describe the daemon's languages when Info does not (no
	// daemon at start-up, or one older than language_info): nsbox mcp
	// passes its own build's (daemon/lang.BuiltinInfo). The run tools are
	// made from them: with neither, only run_shell and the file tools.
	Languages []agentapi.LanguageInfo
	// Network is every sandbox's egress policy (nil: none); the operator
	// sets it (nsbox mcp --allow-net), never the model.
	Network *agentapi.Network
	// Volumes and Datasets are mounted in every sandbox (nsbox mcp
	// --volume, --dataset): the operator decides, never the model.
	Volumes  []agentapi.VolumeMount
	Datasets []string
}

func (cfg Config) networkHosts() []string {
	if cfg.Network == nil {
		return nil
	}
	return cfg.Network.Allow
}

// Server is an MCP server whose tools run in nsbox sandboxes.
type Server struct {
	cfg    Config
	facts  facts
	client *client.Client
	// schemas are the tools' input schemas, by name, for checkBounds.
	schemas map[string]*jsonschema.Schema
	log     *slog.Logger
	sdk     *mcpsdk.Server

	mu    sync.Mutex
	conns map[*mcpsdk.ServerSession]*connState
}

// connState is one MCP connection's nsbox sessions, each created on first
// use: the main language's (its run tool, run_shell, the file tools and
// fork_session) and one per other run tool (run_javascript).
type connState struct {
	mu sync.Mutex // held while a session is created or reset
	// sessions are by run tool's key: "" the main language's, else the
	// tool's language.
	sessions map[string]*connSession
	// branches are the sessions fork_session made; they end with the
	// connection or reset_session.
	branches []string
}

// connSession is one of a connection's sessions: its id ("" none yet) and
// the language it was made with, fixed by the first call ("" the daemon's
// default).
type connSession struct{ id, lang string }

// slot returns c's session for key.
func (c *connState) slot(key string) *connSession {
	if c.sessions == nil {
		c.sessions = map[string]*connSession{}
	}
	cs := c.sessions[key]
	if cs == nil {
		cs = &connSession{}
		c.sessions[key] = cs
	}
	return cs
}

// New returns a server with its tools registered.
func New(cfg Config) (*Server, error) {
	switch cfg.SessionMode {
	case "":
		cfg.SessionMode = SessionPerConnection
	case SessionPerConnection, SessionPerCall:
	default:
		return nil, fmt.Errorf("session mode %q: %w", cfg.SessionMode, ErrUnknownSessionMode)
	}
	if cfg.Limits.OutputBytes == 0 {
		cfg.Limits.OutputBytes = defaultOutputSize
	}
	s := &Server{
		cfg:     cfg,
		facts:   newFacts(cfg),
		client:  cfg.Client,
		log:     cfg.Logger,
		conns:   map[*mcpsdk.ServerSession]*connState{},
		schemas: map[string]*jsonschema.Schema{},
	}
	if s.client == nil {
		s.client = &client.Client{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	version := cfg.Version
	if version == "" {
		version = "dev"
	}
	instructions := s.instructions()
	s.sdk = mcpsdk.NewServer(&mcpsdk.Implementation{Name: "nsbox", Title: "nsbox sandbox", Version: version}, &mcpsdk.ServerOptions{
		Instructions: instructions,
		Capabilities: &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{}},
	})
	s.sdk.AddReceivingMiddleware(s.checkBounds)
	for _, t := range runTools(s.facts) {
		def := t.definition(s.facts)
		s.schemas[def.Name] = def.InputSchema.(*jsonschema.Schema)
		mcpsdk.AddTool(s.sdk, def, s.handler(t))
	}
	for _, t := range definitions(s.facts) {
		s.schemas[t.Name] = t.InputSchema.(*jsonschema.Schema)
		switch t.Name {
		case ToolRunShell:
			mcpsdk.AddTool(s.sdk, t, s.runShell)
		case ToolWriteFile:
			mcpsdk.AddTool(s.sdk, t, s.writeFile)
		case ToolReadFile:
			mcpsdk.AddTool(s.sdk, t, s.readFile)
		case ToolListFiles:
			mcpsdk.AddTool(s.sdk, t, s.listFiles)
		case ToolResetSession:
			mcpsdk.AddTool(s.sdk, t, s.resetSession)
		case ToolForkSession:
			mcpsdk.AddTool(s.sdk, t, s.forkSession)
		}
	}
	return s, nil
}

// instructions tell the client what the tools are for.
func (s *Server) instructions() string {
	f := s.facts
	var titles, others []string
	for _, t := range runTools(f) {
		titles = append(titles, t.lang.Title)
		if t.main {
			continue
		}
		what := t.lang.Title
		for _, v := range t.variants {
			what += " or " + v.Title
		}
		others = append(others, " Use "+t.name()+" for "+what+".")
	}
	what := strings.Join(append(titles, "shell commands"), ", ")
	if i := strings.LastIndex(what, ", "); i >= 0 {
		what = what[:i] + " and " + what[i+2:]
	}
	use := "Use " + f.mainTool() + " for computation, data analysis and plots"
	if f.perCall {
		return "Tools that run " + what + ", each call in a fresh isolated Linux sandbox (" + f.network() + ", no host files). " +
			use + "." + strings.Join(others, "")
	}
	return "Tools that run " + what + " in an isolated Linux sandbox (" + f.network() + ", no host files). " +
		use + "; write_file/read_file/list_files to move files in and out of /workspace." + strings.Join(others, "")
}

// Run serves one MCP connection over t (&mcpsdk.StdioTransport{} for
// `nsbox mcp`) until the client disconnects or ctx is done, then deletes
// the connection's nsbox session.
func (s *Server) Run(ctx context.Context, t mcpsdk.Transport) error {
	ss, err := s.sdk.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp connect: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- ss.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		ss.Close()
		<-waited
		err = nil
	}
	s.endConnection(ss)
	if errors.Is(err, mcpsdk.ErrConnectionClosed) {
		err = nil
	}
	return err
}

// endConnection deletes the connection's session, if it made one.
func (s *Server) endConnection(ss *mcpsdk.ServerSession) {
	s.mu.Lock()
	c := s.conns[ss]
	delete(s.conns, ss)
	s.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.dropSessions(c)
}

func (s *Server) conn(ss *mcpsdk.ServerSession) *connState {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conns[ss]
	if c == nil {
		c = &connState{}
		s.conns[ss] = c
	}
	return c
}

// session returns the connection's session for key (a run tool's: "" the
// main language's), made with lang on first use. created says it is new.
// An existing session is checked with fits (nil: any): a session's
// language is fixed at creation.
func (s *Server) session(ctx context.Context, ss *mcpsdk.ServerSession, key, lang string, fits func(have string) error) (id string, created bool, err error) {
	c := s.conn(ss)
	c.mu.Lock()
	defer c.mu.Unlock()
	slot := c.slot(key)
	if slot.id != "" {
		if fits != nil {
			if err := fits(slot.lang); err != nil {
				return "", false, err
			}
		}
		return slot.id, false, nil
	}
	lim := s.cfg.Limits
	sess, err := s.client.CreateSession(ctx, &agentapi.SessionRequest{
		Rootfs:        s.cfg.Rootfs,
		Language:      lang,
		Limits:        &lim,
		IdleTimeoutMs: s.cfg.IdleTimeout.Milliseconds(),
		Network:       s.cfg.Network,
		Volumes:       s.cfg.Volumes,
		Datasets:      s.cfg.Datasets,
	})
	if err != nil {
		return "", false, fmt.Errorf("starting a sandbox session: %w", err)
	}
	slot.id, slot.lang = sess.ID, lang
	s.log.Info("session created", "session", sess.ID, "rootfs", sess.Rootfs, "language", sess.Language)
	return sess.ID, true, nil
}

// forget drops the connection's session for key if it is still id (the
// session died or expired); the next call creates a new one.
func (s *Server) forget(ss *mcpsdk.ServerSession, key, id string) {
	c := s.conn(ss)
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot := c.slot(key); slot.id == id {
		s.dropSession(&slot.id)
	}
}

// dropSessions deletes c's sessions and branches (c.mu held) and returns
// the keys of the sessions it had, sorted.
func (s *Server) dropSessions(c *connState) []string {
	var had []string
	for _, key := range slices.Sorted(maps.Keys(c.sessions)) {
		if slot := c.sessions[key]; slot.id != "" {
			had = append(had, key)
			s.dropSession(&slot.id)
		}
	}
	for i := range c.branches {
		s.dropSession(&c.branches[i])
	}
	c.branches = nil
	return had
}

// dropSession deletes the session *id, if any, and clears it (its
// connState's mu held).
func (s *Server) dropSession(id *string) {
	if *id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.client.DeleteSession(ctx, *id)
	var ae *agentapi.Error
	if err != nil && !(errors.As(err, &ae) && ae.Code == agentapi.CodeNotFound) {
		s.log.Warn("deleting session", "session", *id, "err", err)
	} else {
		s.log.Info("session deleted", "session", *id)
	}
	*id = ""
}

// isGone reports whether err says a session no longer exists or is dead.
func isGone(err error) bool {
	var ae *agentapi.Error
	return errors.As(err, &ae) && (ae.Code == agentapi.CodeNotFound || ae.Code == agentapi.CodeSessionDead)
}
