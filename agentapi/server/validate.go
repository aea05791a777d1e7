package server

import (
	"encoding/base64"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// Request-shape bounds that do not depend on configuration.
const (
	maxPathLen       = 4096
	maxNameLen       = 255
	maxFiles         = 1000
	maxArgs          = 4096
	maxEnv           = 1000
	maxReturnGlobs   = 100
	maxFileMode      = 0o777
	defaultFileMode  = 0o644
	maxRootfsNameLen = 128
)

// ValidatePath checks a workspace-relative path: not empty, not absolute, no
// NUL, no ".." element, in clean form, within length bounds.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path contains NUL")
	case !utf8.ValidString(p):
		return fmt.Errorf("path is not valid UTF-8")
	case len(p) > maxPathLen:
		return fmt.Errorf("path longer than %d bytes", maxPathLen)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute; give it relative to /workspace", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("path %q has a \"..\" element", p)
		}
		if len(el) > maxNameLen {
			return fmt.Errorf("path %q has an element longer than %d bytes", p, maxNameLen)
		}
	}
	if c := path.Clean(p); c != p || p == "." {
		return fmt.Errorf("path %q is not in clean form (want %q)", p, c)
	}
	return nil
}

// validGlob checks a ReturnFiles pattern.
func validGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("bad glob %q: %v", g, err)
	}
	if g == "" || strings.IndexByte(g, 0) >= 0 || strings.HasPrefix(g, "/") {
		return fmt.Errorf("glob %q must be non-empty, relative and free of NUL", g)
	}
	for _, el := range strings.Split(g, "/") {
		if el == ".." {
			return fmt.Errorf("glob %q has a \"..\" element", g)
		}
	}
	return nil
}

// job is a validated request, ready to become a container.Spec once its
// rootfs is resolved.
type job struct {
	argv        []string // nil when language is set
	language    string
	code        string
	stdin       string
	files       []container.File
	env         []string
	limits      container.Limits
	rootfs      string
	returnFiles []string
}

// validate checks req against the request rules and the daemon's maxima and
// returns the job it describes. Errors are *FieldError.
func (s *Server) validate(req *agentapi.RunRequest) (*job, error) {
	j := &job{stdin: req.Stdin, rootfs: req.Rootfs}
	if j.rootfs == "" {
		j.rootfs = s.pol.Load().defaultRootfs
	} else if len(j.rootfs) > maxRootfsNameLen || strings.ContainsAny(j.rootfs, "/\x00") || j.rootfs == "." || j.rootfs == ".." {
		return nil, fieldErr("rootfs", "%q is not a rootfs name", j.rootfs)
	}

	switch {
	case len(req.Argv) > 0 && (req.Language != "" || req.Code != ""):
		return nil, fieldErr("argv", "give either argv or language+code, not both")
	case len(req.Argv) > 0:
		if len(req.Argv) > maxArgs {
			return nil, fieldErr("argv", "more than %d elements", maxArgs)
		}
		for i, a := range req.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				return nil, fieldErr(fmt.Sprintf("argv[%d]", i), "contains NUL")
			}
		}
		if req.Argv[0] == "" {
			return nil, fieldErr("argv[0]", "empty command")
		}
		j.argv = req.Argv
	case req.Language != "":
		if req.Language != agentapi.LanguagePython && req.Language != agentapi.LanguageBash {
			return nil, fieldErr("language", "%q is not supported; use %q or %q", req.Language, agentapi.LanguagePython, agentapi.LanguageBash)
		}
		if strings.IndexByte(req.Code, 0) >= 0 {
			return nil, fieldErr("code", "contains NUL")
		}
		j.language, j.code = req.Language, req.Code
	case req.Code != "":
		return nil, fieldErr("language", "required with code (%q or %q)", agentapi.LanguagePython, agentapi.LanguageBash)
	default:
		return nil, fieldErr("argv", "required: give argv, or language and code")
	}

	if len(req.Files) > maxFiles {
		return nil, fieldErr("files", "more than %d files", maxFiles)
	}
	seen := make(map[string]bool, len(req.Files))
	for i, f := range req.Files {
		name := fmt.Sprintf("files[%d]", i)
		if err := ValidatePath(f.Path); err != nil {
			return nil, fieldErr(name+".path", "%v", err)
		}
		if seen[f.Path] {
			return nil, fieldErr(name+".path", "%q given twice", f.Path)
		}
		seen[f.Path] = true
		if f.Mode > maxFileMode {
			return nil, fieldErr(name+".mode", "%#o has bits beyond 0777", f.Mode)
		}
		cf := container.File{Path: f.Path, Mode: f.Mode}
		if cf.Mode == 0 {
			cf.Mode = defaultFileMode
		}
		switch {
		case f.ContentBase64 != "" && f.Text != "":
			return nil, fieldErr(name, "give content_base64 or text, not both")
		case f.ContentBase64 != "":
			data, err := base64.StdEncoding.DecodeString(f.ContentBase64)
			if err != nil {
				return nil, fieldErr(name+".content_base64", "not standard base64: %v", err)
			}
			cf.Data = data
		default:
			cf.Data = []byte(f.Text)
		}
		j.files = append(j.files, cf)
	}

	if len(req.Env) > maxEnv {
		return nil, fieldErr("env", "more than %d variables", maxEnv)
	}
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := req.Env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fieldErr("env", "%q is not a variable name", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, fieldErr("env."+k, "value contains NUL")
		}
		j.env = append(j.env, k+"="+v)
	}

	if len(req.ReturnFiles) > maxReturnGlobs {
		return nil, fieldErr("return_files", "more than %d patterns", maxReturnGlobs)
	}
	for i, g := range req.ReturnFiles {
		if err := validGlob(g); err != nil {
			return nil, fieldErr(fmt.Sprintf("return_files[%d]", i), "%v", err)
		}
	}
	j.returnFiles = req.ReturnFiles

	lim, err := s.limitsFor(req.Profile, req.Limits)
	if err != nil {
		return nil, err
	}
	j.limits = lim
	return j, nil
}

// limits checks the requested limits against the maxima (refused, never
// clamped) and fills the rest from the defaults.
func (pol *policy) limits(l *agentapi.Limits) (container.Limits, error) {
	if l == nil {
		l = &agentapi.Limits{}
	}
	mx := pol.max
	ints := []struct {
		name     string
		got, max int64
	}{
		{"limits.timeout_ms", l.TimeoutMs, mx.Timeout.Milliseconds()},
		{"limits.memory_bytes", l.MemoryBytes, mx.MemoryBytes},
		{"limits.pids", l.Pids, mx.Pids},
		{"limits.disk_bytes", l.DiskBytes, mx.DiskBytes},
		{"limits.output_bytes", l.OutputBytes, mx.OutputBytes},
	}
	for _, c := range ints {
		if c.got < 0 {
			return container.Limits{}, fieldErr(c.name, "%d is negative", c.got)
		}
		if c.got > c.max {
			return container.Limits{}, fieldErr(c.name, "%d is above the daemon's maximum %d", c.got, c.max)
		}
	}
	if l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) {
		return container.Limits{}, fieldErr("limits.cpus", "%v is not a CPU count", l.CPUs)
	}
	if l.CPUs > mx.CPUs {
		return container.Limits{}, fieldErr("limits.cpus", "%v is above the daemon's maximum %v", l.CPUs, mx.CPUs)
	}
	lim := container.Limits{
		Timeout:     time.Duration(l.TimeoutMs) * time.Millisecond,
		MemoryBytes: l.MemoryBytes,
		Pids:        l.Pids,
		CPUs:        l.CPUs,
		DiskBytes:   l.DiskBytes,
		OutputBytes: l.OutputBytes,
	}
	d := pol.defaults
	if lim.Timeout == 0 {
		lim.Timeout = d.Timeout
	}
	if lim.MemoryBytes == 0 {
		lim.MemoryBytes = d.MemoryBytes
	}
	if lim.Pids == 0 {
		lim.Pids = d.Pids
	}
	if lim.CPUs == 0 {
		lim.CPUs = d.CPUs
	}
	if lim.DiskBytes == 0 {
		lim.DiskBytes = d.DiskBytes
	}
	if lim.OutputBytes == 0 {
		lim.OutputBytes = d.OutputBytes
	}
	return lim, nil
}

// wireLimits converts engine limits to their wire form.
func wireLimits(l container.Limits) agentapi.Limits {
	return agentapi.Limits{
		TimeoutMs:   l.Timeout.Milliseconds(),
		MemoryBytes: l.MemoryBytes,
		Pids:        l.Pids,
		CPUs:        l.CPUs,
		DiskBytes:   l.DiskBytes,
		OutputBytes: l.OutputBytes,
	}
}
