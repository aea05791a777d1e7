package policy

import (
	"encoding/base64"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/egress"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/lang"
)

// MaxArgBytes is the longest one argument or environment string execve
// takes (the kernel's MAX_ARG_STRLEN, 32 pages, less the NUL): longer ones
// fail the exec with E2BIG, so they are refused here with a field error.
const MaxArgBytes = 32*4096 - 1

// maxExecBytes bounds the command and environment together: the kernel
// takes a quarter of the stack limit (8 MiB by default) and nsbox adds its
// base environment.
const maxExecBytes = 1 << 20

// Request-shape bounds that do not depend on configuration.
const (
	maxFiles         = 1000
	maxArgs          = 4096
	maxEnv           = 1000
	maxReturnGlobs   = 100
	maxImports       = 1000
	maxModuleName    = 256
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

// Job is a validated request, ready to become a container.Spec once its
// rootfs is resolved.
type Job struct {
	Argv        []string // nil when Language is set
	Language    string   // Lang's name
	Lang        *lang.Descriptor
	Code        string
	Stdin       string
	Files       []container.File
	Env         []string
	Limits      container.Limits
	Rootfs      string
	ReturnFiles []string
	// AllowedImports: nil means no restriction (Python code only).
	AllowedImports []string
	// Network is the run's egress policy; nil means loopback only.
	Network *egress.Policy
	// Init is agentapi.RunRequest.Init: the run goes to the engine.
	Init bool
}

// Validate checks req against the request rules and the daemon's maxima and
// returns the job it describes. Errors are *errdefs.FieldError.
func (pol *Rules) Validate(req *agentapi.RunRequest) (*Job, error) {
	j := &Job{Stdin: req.Stdin, Rootfs: req.Rootfs, Init: req.Init}
	if j.Rootfs == "" {
		j.Rootfs = pol.DefaultRootfs
	} else if !validRootfsName(j.Rootfs) {
		return nil, errdefs.Field("rootfs", "%q is not a rootfs name", j.Rootfs)
	}

	switch {
	case len(req.Argv) > 0 && (req.Language != "" || req.Code != ""):
		return nil, errdefs.Field("argv", "give either argv or language+code, not both")
	case len(req.Argv) > 0:
		if len(req.Argv) > maxArgs {
			return nil, errdefs.Field("argv", "more than %d elements", maxArgs)
		}
		for i, a := range req.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				return nil, errdefs.Field(fmt.Sprintf("argv[%d]", i), "contains NUL")
			}
			if len(a) > MaxArgBytes {
				return nil, errdefs.Field(fmt.Sprintf("argv[%d]", i), "%d bytes, above the kernel's limit of %d for one argument; pass large data as a file (files)", len(a), MaxArgBytes)
			}
		}
		if req.Argv[0] == "" {
			return nil, errdefs.Field("argv[0]", "empty command")
		}
		j.Argv = req.Argv
	case req.Language != "":
		l, err := pol.language(req.Language, j.Rootfs)
		if err != nil {
			return nil, err
		}
		if req.Stdin != "" && l.StdinIsProgram() {
			return nil, errdefs.Field("stdin", "language %q reads its program from standard input; give the program's input as files instead", l.Name)
		}
		if strings.IndexByte(req.Code, 0) >= 0 {
			return nil, errdefs.Field("code", "contains NUL")
		}
		if l.CodeInArgv() && len(req.Code) > MaxArgBytes {
			return nil, errdefs.Field("code", "%d bytes, above the kernel's limit of %d for the argument of bash -c; put the script in files and run argv [\"bash\", \"script.sh\"]", len(req.Code), MaxArgBytes)
		}
		j.Lang, j.Language, j.Code = l, l.Name, req.Code
	case req.Code != "":
		return nil, errdefs.Field("language", "required with code: one of %s", strings.Join(pol.Languages(j.Rootfs), ", "))
	default:
		return nil, errdefs.Field("argv", "required: give argv, or language and code")
	}

	var err error
	if j.Files, err = validFiles(req.Files); err != nil {
		return nil, err
	}
	if j.Env, err = envList(req.Env); err != nil {
		return nil, err
	}

	total := 0 // code goes to the runner or a file, not through exec, but for bash -c
	if j.Lang != nil && j.Lang.CodeInArgv() {
		total = len(j.Code)
	}
	for _, a := range j.Argv {
		total += len(a) + 1
	}
	for _, e := range j.Env {
		total += len(e) + 1
	}
	if total > maxExecBytes {
		return nil, errdefs.Field("argv", "the command and env take %d bytes together, above the %d an exec takes; pass large data as files", total, maxExecBytes)
	}

	if len(req.ReturnFiles) > maxReturnGlobs {
		return nil, errdefs.Field("return_files", "more than %d patterns", maxReturnGlobs)
	}
	for i, g := range req.ReturnFiles {
		if err := validGlob(g); err != nil {
			return nil, errdefs.Field(fmt.Sprintf("return_files[%d]", i), "%v", err)
		}
	}
	j.ReturnFiles = req.ReturnFiles

	if req.AllowedImports != nil {
		if j.Lang == nil || !j.Lang.AllowedImports() {
			return nil, errdefs.Field("allowed_imports", "applies to Python code only (language %q); remove it for argv and bash runs", lang.Default().Name)
		}
		if err := ValidImports(req.AllowedImports); err != nil {
			return nil, err
		}
		j.AllowedImports = req.AllowedImports
	}

	if j.Limits, err = pol.limitsFor(req.Profile, req.Limits); err != nil {
		return nil, err
	}
	if j.Network, err = pol.network(req.Profile, req.Network); err != nil {
		return nil, err
	}
	return j, nil
}

// validFiles checks a request's input files and decodes them.
func validFiles(files []agentapi.File) ([]container.File, error) {
	var out []container.File
	if len(files) > maxFiles {
		return nil, errdefs.Field("files", "more than %d files", maxFiles)
	}
	seen := make(map[string]bool, len(files))
	for i, f := range files {
		name := fmt.Sprintf("files[%d]", i)
		if err := container.ValidPath(f.Path); err != nil {
			return nil, errdefs.Field(name+".path", "%v", err)
		}
		if seen[f.Path] {
			return nil, errdefs.Field(name+".path", "%q given twice", f.Path)
		}
		seen[f.Path] = true
		if f.Mode > maxFileMode {
			return nil, errdefs.Field(name+".mode", "%#o has bits beyond 0777", f.Mode)
		}
		cf := container.File{Path: f.Path, Mode: f.Mode}
		if cf.Mode == 0 {
			cf.Mode = defaultFileMode
		}
		switch {
		case f.ContentBase64 != "" && f.Text != "":
			return nil, errdefs.Field(name, "give content_base64 or text, not both")
		case f.ContentBase64 != "":
			data, err := base64.StdEncoding.DecodeString(f.ContentBase64)
			if err != nil {
				return nil, errdefs.Field(name+".content_base64", "not standard base64: %v", err)
			}
			cf.Data = data
		default:
			cf.Data = []byte(f.Text)
		}
		out = append(out, cf)
	}
	return out, nil
}

// envList checks a request's env and returns it as sorted KEY=VALUE.
func envList(env map[string]string) ([]string, error) {
	if err := ValidEnv("env", env); err != nil {
		return nil, err
	}
	var out []string
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out, nil
}

// validRootfsName checks the name a request gives a rootfs.
func validRootfsName(name string) bool {
	return len(name) <= maxRootfsNameLen && !strings.ContainsAny(name, "/\x00") && name != "." && name != ".."
}

// ValidImports checks an allowed_imports list: dotted Python module names
// ("pandas", "os.path"), at most maxImports of them.
func ValidImports(names []string) error {
	if len(names) > maxImports {
		return errdefs.Field("allowed_imports", "more than %d modules", maxImports)
	}
	for i, n := range names {
		if !validModule(n) {
			return errdefs.Field(fmt.Sprintf("allowed_imports[%d]", i), "%q is not a module name: give dotted Python identifiers such as \"pandas\" or \"os.path\"", n)
		}
	}
	return nil
}

func validModule(n string) bool {
	if n == "" || len(n) > maxModuleName {
		return false
	}
	for _, part := range strings.Split(n, ".") {
		if part == "" || (part[0] >= '0' && part[0] <= '9') {
			return false
		}
		for _, r := range part {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// ValidEnv checks environment variables given in field: their number,
// names and sizes.
func ValidEnv(field string, env map[string]string) error {
	if len(env) > maxEnv {
		return errdefs.Field(field, "more than %d variables", maxEnv)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := env[k]
		// The engine's rule (runenv), checked here before any sandbox work.
		if err := container.ValidEnvKey(k); err != nil {
			return errdefs.Field(field, "%v", err)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return errdefs.Field(field+"."+k, "value contains NUL")
		}
		if len(k)+1+len(v) > MaxArgBytes {
			return errdefs.Field(field+"."+k, "%d bytes, above the kernel's limit of %d for one variable; pass large data as a file (files)", len(k)+1+len(v), MaxArgBytes)
		}
	}
	return nil
}
