package daemon

import (
	"encoding/base64"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// Request-shape bounds that do not depend on configuration.
const (
	maxFiles         = 1000
	maxArgs          = 4096
	maxEnv           = 1000
	maxReturnGlobs   = 100
	maxFileMode      = 0o777
	defaultFileMode  = 0o644
	maxRootfsNameLen = 128
)

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
func (pol *policy) validate(req *agentapi.RunRequest) (*job, error) {
	j := &job{stdin: req.Stdin, rootfs: req.Rootfs}
	if j.rootfs == "" {
		j.rootfs = pol.defaultRootfs
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
		if err := container.ValidPath(f.Path); err != nil {
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

	lim, err := pol.limitsFor(req.Profile, req.Limits)
	if err != nil {
		return nil, err
	}
	j.limits = lim
	return j, nil
}
