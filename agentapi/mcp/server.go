package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// SessionPerCall runs every run_python and run_shell call in a fresh
	// one-shot sandbox; the file tools and reset_session are not offered.
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
// use: the Python one (run_python, run_shell, the file tools) and the
// Node.js one (run_javascript).
type connState struct {
	mu sync.Mutex // held while a session is created or reset
	id string     // the Python session
	// node is the Node.js session, nodeLang its language (javascript or
	// typescript), fixed by the first run_javascript call.
	node, nodeLang string
	// branches are the sessions fork_session made; they end with the
	// connection or reset_session.
	branches []string
}

// slot returns the session id field of c for language lang ("" is Python).
func (c *connState) slot(lang string) *string {
	if lang == "" {
		return &c.id
	}
	return &c.node
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
	what, js := "Python and shell commands", ""
	if s.facts.javascript {
		what, js = "Python, JavaScript and shell commands", " Use run_javascript for JavaScript or TypeScript on Node.js."
	}
	instructions := "Tools that run " + what + " in an isolated Linux sandbox (" + s.facts.network() + ", no host files). " +
		"Use run_python for computation, data analysis and plots; write_file/read_file/list_files to move files in and out of /workspace." + js
	if s.facts.perCall {
		instructions = "Tools that run " + what + ", each call in a fresh isolated Linux sandbox (" + s.facts.network() + ", no host files). " +
			"Use run_python for computation, data analysis and plots." + js
	}
	s.sdk = mcpsdk.NewServer(&mcpsdk.Implementation{Name: "nsbox", Title: "nsbox sandbox", Version: version}, &mcpsdk.ServerOptions{
		Instructions: instructions,
		Capabilities: &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{}},
	})
	s.sdk.AddReceivingMiddleware(s.checkBounds)
	for _, t := range definitions(s.facts) {
		s.schemas[t.Name] = t.InputSchema.(*jsonschema.Schema)
		switch t.Name {
		case ToolRunPython:
			mcpsdk.AddTool(s.sdk, t, s.runPython)
		case ToolRunShell:
			mcpsdk.AddTool(s.sdk, t, s.runShell)
		case ToolRunJavaScript:
			mcpsdk.AddTool(s.sdk, t, s.runJavaScript)
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

// session returns the connection's session for lang ("" the Python one,
// else javascript or typescript: the Node.js one), creating it on first
// use. created says it is new. A TypeScript call in a JavaScript session
// is refused (ErrNodeLanguage): a session's language is fixed at creation.
func (s *Server) session(ctx context.Context, ss *mcpsdk.ServerSession, lang string) (id string, created bool, err error) {
	c := s.conn(ss)
	c.mu.Lock()
	defer c.mu.Unlock()
	slot := c.slot(lang)
	if *slot != "" {
		if lang == agentapi.LanguageTypeScript && c.nodeLang != agentapi.LanguageTypeScript {
			return "", false, fmt.Errorf("%w: this conversation's Node.js session was started by a JavaScript call; "+
				"send plain JavaScript, or call reset_session (which also discards run_python's state) and start again with typescript: true", ErrNodeLanguage)
		}
		return *slot, false, nil
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
	*slot = sess.ID
	if lang != "" {
		c.nodeLang = lang
	}
	s.log.Info("session created", "session", sess.ID, "rootfs", sess.Rootfs, "language", sess.Language)
	return sess.ID, true, nil
}

// forget drops the connection's session for lang if it is still id (the
// session died or expired); the next call creates a new one.
func (s *Server) forget(ss *mcpsdk.ServerSession, lang, id string) {
	c := s.conn(ss)
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot := c.slot(lang); *slot == id {
		s.dropSession(slot)
	}
}

// dropSessions deletes c's sessions and branches (c.mu held).
func (s *Server) dropSessions(c *connState) {
	s.dropSession(&c.id)
	s.dropSession(&c.node)
	for i := range c.branches {
		s.dropSession(&c.branches[i])
	}
	c.branches = nil
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
