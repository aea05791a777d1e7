package e2b

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/envd"
	"github.com/nsbox/nsbox/agentapi/e2b/listing"
	"github.com/nsbox/nsbox/agentapi/e2b/network"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/sessions"
)

// DefaultTimeout is a sandbox's life when create names none (E2B's).
const DefaultTimeout = 300 * time.Second

// The templates the SDKs use by default; both mean the daemon's default
// rootfs.
var defaultTemplates = []string{"base", "code-interpreter-v1", "code-interpreter"}

// createRequest is the body of POST /sandboxes (E2B's NewSandbox).
type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"` // seconds
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	AutoPause           *bool             `json:"autoPause"`
	Network             *network.Config   `json:"network"`
	VolumeMounts        any               `json:"volumeMounts"`
	MCP                 any               `json:"mcp"`
	AutoResume          *autoResume       `json:"autoResume"`
	Alias               string            `json:"alias"`
}

// sandboxJSON is E2B's Sandbox / SandboxDetail / ListedSandbox in one.
type sandboxJSON struct {
	SandboxID          string            `json:"sandboxID"`
	TemplateID         string            `json:"templateID"`
	Alias              string            `json:"alias,omitempty"`
	ClientID           string            `json:"clientID"`
	EnvdVersion        string            `json:"envdVersion"`
	EnvdAccessToken    string            `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string            `json:"trafficAccessToken,omitempty"`
	StartedAt          *time.Time        `json:"startedAt,omitempty"`
	EndAt              *time.Time        `json:"endAt,omitempty"`
	CPUCount           *float64          `json:"cpuCount,omitempty"`
	MemoryMB           *int64            `json:"memoryMB,omitempty"`
	DiskSizeMB         *int64            `json:"diskSizeMB,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	State              string            `json:"state,omitempty"`
	Lifecycle          *lifecycle        `json:"lifecycle,omitempty"`
	Network            *network.Info     `json:"network,omitempty"`
}

// autoResume is the create body's autoResume: {"enabled": bool}.
type autoResume struct {
	Enabled bool `json:"enabled"`
}

// lifecycle is E2B's SandboxDetail.lifecycle: what the timeout does.
type lifecycle struct {
	OnTimeout  string `json:"onTimeout"` // "kill" or "pause"
	AutoResume bool   `json:"autoResume"`
}

// clientID is what E2B reports as the sandbox's host; nsbox has one.
const clientID = "nsbox"

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	if err := unsupportedCreate(&req); err != nil {
		writeErr(w, err)
		return
	}
	if err := recordFits(&req); err != nil {
		writeErr(w, err)
		return
	}
	timeout, err := timeoutOr(req.Timeout)
	if err != nil {
		writeErr(w, err)
		return
	}
	action := "" // the timeout ends the session; lifecycle.onTimeout "pause": parks it
	if req.AutoPause != nil && *req.AutoPause {
		action = "park"
	}
	snap, fromSnapshot := s.snaps.Lookup(r, req.TemplateID)
	var netInfo *network.Info
	var egress *agentapi.Network
	if req.Network != nil {
		if netInfo, egress, err = req.Network.Parse(fromSnapshot); err != nil {
			writeErr(w, err)
			return
		}
	}
	id := randomHex(16)
	var sess *agentapi.Session
	if fromSnapshot { // a snapshot's copy
		var c *agentapi.CarriedSession
		if c, err = s.core.StartFromSnapshot(r.Context(), snap, sessions.FromSnapshotOptions{ID: id, Lifetime: timeout, LifetimeAction: cmp.Or(action, "end"), Env: req.EnvVars}); err == nil {
			sess = &c.Session
		}
	} else {
		sess, err = s.newSession(r.Context(), &req, id, timeout, action, egress)
	}
	if err != nil {
		s.log.Info("e2b: create refused", "template", req.TemplateID, "err", err)
		writeErr(w, err)
		return
	}
	template := req.TemplateID
	if template == "" {
		template = defaultTemplates[0]
	}
	sb := &sandbox{
		id: sess.ID, key: keyOf(r.Context()), token: randomHex(24), traffic: randomHex(24),
		template: template, alias: req.Alias, metadata: req.Metadata, envs: req.EnvVars, started: sess.CreatedAt,
		cpus: sess.Limits.CPUs, memoryMB: sess.Limits.MemoryBytes >> 20, diskMB: sess.Limits.DiskBytes >> 20,
		contexts: map[string]codeContext{}, autoPause: action == "park", network: netInfo,
	}
	if err := s.keepRecord(r.Context(), sb); err != nil {
		_ = s.core.DeleteSession(r.Context(), sb.id)
		s.log.Info("e2b: create refused", "template", req.TemplateID, "err", err)
		writeErr(w, err)
		return
	}
	s.mu.Lock()
	s.sandboxes[sb.id] = sb
	s.mu.Unlock()
	s.log.Info("e2b: sandbox created", "sandbox", sb.id, "template", template, "rootfs", sess.Rootfs, "timeout", timeout)
	writeJSON(w, http.StatusCreated, s.describe(sb, sess, true))
}

// newSession makes a sandbox's session from its template, as id, with
// the egress policy of its network option (nil: none).
func (s *Server) newSession(ctx context.Context, req *createRequest, id string, timeout time.Duration, action string, egress *agentapi.Network) (*agentapi.Session, error) {
	sreq, err := s.sessionRequest(ctx, req.TemplateID, req.EnvVars)
	if err != nil {
		return nil, err
	}
	sreq.LifetimeMs, sreq.LifetimeAction, sreq.Network = timeout.Milliseconds(), action, egress
	return s.core.CreateSessionWith(ctx, sreq, daemon.SessionOptions{ID: id, Processes: true, NoIdleEnd: true, Home: envd.Home})
}

// timeoutOr is a request's timeout in seconds, which must be positive;
// E2B's default when there is none.
func timeoutOr(secs *int64) (time.Duration, error) {
	if secs == nil {
		return DefaultTimeout, nil
	}
	if *secs <= 0 {
		return 0, errdefs.Field("timeout", "%d: must be a positive number of seconds", *secs)
	}
	return time.Duration(*secs) * time.Second, nil
}

// unsupportedCreate refuses what nsbox cannot do rather than ignore it.
func unsupportedCreate(req *createRequest) error {
	switch {
	case req.AutoResume != nil && req.AutoResume.Enabled:
		return errdefs.Field("autoResume", "resuming a paused sandbox on traffic is not supported by nsbox's E2B endpoint: Sandbox.connect resumes it")
	case req.VolumeMounts != nil:
		return errdefs.Field("volumeMounts", "volumes are not supported by nsbox's E2B endpoint")
	case req.MCP != nil:
		return errdefs.Field("mcp", "the MCP gateway is not supported by nsbox's E2B endpoint")
	}
	return nil
}

// recordFits refuses, before a sandbox is made for them, metadata and
// envs that its record (a session's meta) could not hold.
func recordFits(req *createRequest) error {
	n := 0
	for _, m := range []map[string]string{req.Metadata, req.EnvVars} {
		for k, v := range m {
			n += len(k) + len(v)
		}
	}
	if n > sessions.MaxMetaBytes {
		return errdefs.Field("metadata", "metadata and envVars hold %d bytes; a sandbox keeps at most %d of them: pass large values as files", n, sessions.MaxMetaBytes)
	}
	return nil
}

// sessionRequest maps a template to a session: a rootfs of that name, a
// profile of that name (its limits, on the default rootfs), or one of the
// SDKs' default templates (the default rootfs, the daemon's limits). Each
// exec may run as long as the daemon's maximum: an E2B cell has no timeout
// of its own, the SDK's is on the client.
func (s *Server) sessionRequest(ctx context.Context, template string, envs map[string]string) (*agentapi.SessionRequest, error) {
	info, err := s.core.Info(ctx)
	if err != nil {
		return nil, err
	}
	limits := info.DefaultLimits
	req := &agentapi.SessionRequest{Env: envs, IdleAction: "end"}
	switch {
	case template == "" || slices.Contains(defaultTemplates, template):
	case slices.Contains(info.Rootfs, template):
		req.Rootfs = template
	default:
		i := slices.IndexFunc(info.Profiles, func(p agentapi.Profile) bool { return p.Name == template })
		if i < 0 {
			return nil, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("template %q: not a rootfs (%s), a profile or a default template (%s) of this nsbox daemon",
				template, strings.Join(info.Rootfs, ", "), strings.Join(defaultTemplates, ", ")))
		}
		limits = info.Profiles[i].Limits
	}
	limits.TimeoutMs = info.MaxLimits.TimeoutMs
	req.Limits = &limits
	return req, nil
}

// handleAlias is GET /templates/aliases/{alias} (Template.exists): 200 for
// a name Sandbox.create takes (a default template, a rootfs, a profile,
// or a snapshot of the caller's key), else the 404 create would answer.
func (s *Server) handleAlias(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("alias")
	if id, ok := s.snaps.Lookup(r, name); ok {
		writeJSON(w, http.StatusOK, map[string]any{"templateID": id, "public": false})
		return
	}
	if _, err := s.sessionRequest(r.Context(), name, nil); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": name, "public": true})
}

// describe is a sandbox as E2B reports it; secrets only to its creator's
// create and connect answers.
func (s *Server) describe(sb *sandbox, sess *agentapi.Session, secrets bool) sandboxJSON {
	out := sandboxJSON{
		SandboxID: sb.id, TemplateID: sb.template, Alias: sb.alias, ClientID: clientID, EnvdVersion: EnvdVersion,
		Metadata: sb.metadata, State: "running",
	}
	if secrets {
		out.EnvdAccessToken, out.TrafficAccessToken = sb.token, sb.traffic
	}
	if sess != nil {
		started, end := sess.CreatedAt, sess.ExpiresAt
		out.StartedAt, out.EndAt = &started, &end
		if sess.State == agentapi.SessionParked || sess.State == agentapi.SessionPaused {
			out.State = "paused"
		}
	}
	out.CPUCount, out.MemoryMB, out.DiskSizeMB = &sb.cpus, &sb.memoryMB, &sb.diskMB
	out.Lifecycle = &lifecycle{OnTimeout: "kill"}
	if sb.autoPause {
		out.Lifecycle.OnTimeout = "pause"
	}
	out.Network = sb.networkInfo()
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	return out
}

// live returns the caller's sandbox id and its session, forgetting a
// sandbox whose session has ended; a missing one is a 404.
func (s *Server) live(ctx context.Context, id string) (*sandbox, *agentapi.Session, error) {
	sb := s.owned(keyOf(ctx), id)
	if sb == nil {
		return nil, nil, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("sandbox %q not found", id))
	}
	sess, err := s.core.Session(ctx, id)
	switch {
	case err != nil:
	case sess.State == agentapi.SessionDead:
		_ = s.core.DeleteSession(ctx, id)
		err = errdefs.In(errdefs.ErrNotFound, fmt.Errorf("sandbox %q ended: %s", id, sess.DeadReason))
	case sess.State == agentapi.SessionParked && !time.Now().Before(sess.ExpiresAt):
		// A parked session is kept [sessions] park_retention (its
		// expires_at) and then removed: the paused sandbox is gone.
		_ = s.core.DeleteSession(ctx, id)
		err = errdefs.In(errdefs.ErrNotFound, fmt.Errorf("sandbox %q ended while paused: it was paused longer than the daemon keeps paused sandboxes ([sessions] park_retention)", id))
	}
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			s.forget(id)
		}
		return nil, nil, err
	}
	return sb, sess, nil
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	sb, sess, err := s.live(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.describe(sb, sess, true))
}

// handleList is GET /v2/sandboxes (and /sandboxes): the caller's
// sandboxes, filtered and paged as E2B's API does (package listing).
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q, err := listing.Parse(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	out, running := []sandboxJSON{}, 0
	for _, sb := range s.ofKey(keyOf(r.Context())) {
		_, sess, err := s.live(r.Context(), sb.id)
		if err != nil {
			continue
		}
		d := s.describe(sb, sess, false)
		if q.Match(listing.Entry{ID: sb.id, State: d.State, Started: *d.StartedAt, Template: sb.template, Metadata: sb.metadata}) {
			out = append(out, d)
			if d.State == "running" {
				running++
			}
		}
	}
	if len(q.States) == 0 || slices.Contains(q.States, "running") {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	out, next := listing.Page(q, out, func(d sandboxJSON) (time.Time, string) { return *d.StartedAt, d.SandboxID })
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.owned(keyOf(r.Context()), id) == nil {
		writeErr(w, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("sandbox %q not found", id)))
		return
	}
	err := s.core.DeleteSession(r.Context(), id)
	s.forget(id)
	if err != nil {
		writeErr(w, err)
		return
	}
	s.log.Info("e2b: sandbox killed", "sandbox", id)
	w.WriteHeader(http.StatusNoContent)
}

// timeoutRequest is the body of /timeout and /refreshes.
type timeoutRequest struct {
	Timeout  *int64 `json:"timeout"`  // seconds
	Duration *int64 `json:"duration"` // seconds, /refreshes
}

// setTimeout makes the sandbox end d from now.
func (s *Server) setTimeout(ctx context.Context, id string, secs *int64) (*sandbox, *agentapi.Session, error) {
	sb, sess, err := s.live(ctx, id)
	if err != nil || secs == nil {
		return sb, sess, err
	}
	if *secs <= 0 {
		return nil, nil, errdefs.Field("timeout", "%d: must be a positive number of seconds", *secs)
	}
	sess, err = s.core.SetSessionLifetime(ctx, id, time.Duration(*secs)*time.Second)
	return sb, sess, err
}

func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request) {
	var req timeoutRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	if req.Timeout == nil {
		writeErr(w, errdefs.Field("timeout", "is required (seconds)"))
		return
	}
	if _, _, err := s.setTimeout(r.Context(), r.PathValue("id"), req.Timeout); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request) {
	var req timeoutRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	if _, _, err := s.setTimeout(r.Context(), r.PathValue("id"), req.Duration); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// metric is one of E2B's SandboxMetric samples.
type metric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      float64   `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// metricsBucket is E2B's metrics collection interval: its samples sit
// on 5 s buckets, and start and end are whole seconds.
const metricsBucket = 5

// handleMetrics answers one sample taken now (nsbox keeps no history):
// CPU use since the previous sample (or since the start), the memory high
// mark, the workspace's use. A range (start, end: Unix seconds) gets it
// when the range reaches the present (end within a bucket of now), else
// nothing, as E2B answers a range with no sample.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	sb, _, err := s.live(r.Context(), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	now := time.Now()
	start, end := int64(math.MinInt64), int64(math.MaxInt64)
	for _, f := range []struct {
		name string
		p    *int64
	}{{"start", &start}, {"end", &end}} {
		if v := r.URL.Query().Get(f.name); v != "" {
			if *f.p, err = strconv.ParseInt(v, 10, 64); err != nil || *f.p < 0 {
				writeErr(w, errdefs.Field(f.name, "%q: want Unix seconds", v))
				return
			}
		}
	}
	if start > end {
		writeErr(w, errdefs.Field("start", "%d is after end %d", start, end))
		return
	}
	// The SDKs round start and end to the nearest second.
	if start > now.Unix()+1 || end < now.Unix()-metricsBucket {
		writeJSON(w, http.StatusOK, []metric{})
		return
	}
	st, err := s.core.SessionStats(r.Context(), sb.id)
	if err != nil {
		writeErr(w, err)
		return
	}
	sb.mu.Lock()
	since, from := sb.lastCPU, sb.lastAt
	if from.IsZero() {
		from = sb.started
	}
	sb.lastCPU, sb.lastAt = st.CPU, now
	sb.mu.Unlock()
	pct := 0.0
	if el := now.Sub(from); el > 0 && sb.cpus > 0 {
		pct = min(100, 100*float64(st.CPU-since)/float64(el)/sb.cpus)
	}
	writeJSON(w, http.StatusOK, []metric{{
		Timestamp: now.UTC(), TimestampUnix: now.Unix(), CPUCount: sb.cpus, CPUUsedPct: pct,
		MemUsed: st.MemoryBytes, MemTotal: sb.memoryMB << 20, DiskUsed: st.DiskUsedBytes, DiskTotal: sb.diskMB << 20,
	}})
}

// running is the template of a running sandbox of r's key (snapshots).
func (s *Server) running(r *http.Request, id string) (string, error) {
	sb, sess, err := s.live(r.Context(), id)
	if err == nil && sess.State == agentapi.SessionParked {
		err = errdefs.In(errdefs.ErrSessionParked, errors.New(errPaused(id)))
	}
	if err != nil {
		return "", err
	}
	return sb.template, nil
}
