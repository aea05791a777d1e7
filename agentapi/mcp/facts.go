package mcp

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
)

// facts is what the tools tell a model about the sandboxes it gets: the
// daemon's answer to GET /v1/info at start-up (Config.Info) under the
// server's own flags. Unknown values are zero and left out of the text.
type facts struct {
	perCall bool
	rootfs  string // the rootfs name; "" unknown
	// stack lists the data-science modules the rootfs imports (top-level
	// names); stackKnown says whether the daemon told, so that an empty
	// stack means "none".
	stack      []string
	stackKnown bool
	timeoutS   int64    // default timeout of one call; 0 unknown
	maxTimeout int64    // the largest timeout_s (seconds)
	memory     int64    // bytes; 0 unknown
	output     int64    // output kept per stream and call
	allowNet   []string // hosts the sandboxes may reach through the daemon's proxy
	// all are the daemon's languages (Info.LanguageInfo, else
	// Config.Languages); langs those the rootfs runs (Info.Languages), or
	// the default one when the daemon did not say. The run tools are made
	// from them (runTools).
	all, langs []agentapi.LanguageInfo
	// mounts describe the operator's volumes and datasets, one phrase
	// each ("/mnt/corpus (read-only)").
	mounts []string
}

// mounted tells what the sandboxes see under /mnt, for the descriptions.
func (f facts) mounted() string {
	if len(f.mounts) == 0 {
		return ""
	}
	return "Mounted: " + strings.Join(f.mounts, ", ") + ". "
}

// network says what network the sandboxes have, for the descriptions.
func (f facts) network() string {
	if len(f.allowNet) == 0 {
		return "no network"
	}
	return "network only to " + strings.Join(f.allowNet, ", ") + " (HTTP/HTTPS through a proxy; pip works if its index is among them)"
}

// newFacts reads cfg and cfg.Info.
func newFacts(cfg Config) facts {
	f := facts{allowNet: cfg.networkHosts(),
		perCall:    cfg.SessionMode == SessionPerCall,
		rootfs:     cfg.Rootfs,
		timeoutS:   cfg.Limits.TimeoutMs / 1000,
		maxTimeout: MaxTimeoutS,
		memory:     cfg.Limits.MemoryBytes,
		output:     cfg.Limits.OutputBytes,
	}
	for _, v := range cfg.Volumes {
		at, how := cmp.Or(v.Path, "/mnt/"+v.Name), "a volume kept across sessions"
		if v.ReadOnly {
			how += ", read-only"
		}
		f.mounts = append(f.mounts, at+" ("+how+")")
	}
	for _, d := range cfg.Datasets {
		f.mounts = append(f.mounts, "/mnt/"+d+" (a read-only dataset)")
	}
	if f.output == 0 {
		f.output = defaultOutputSize
	}
	info := cfg.Info
	f.all = cfg.Languages
	if info != nil && len(info.LanguageInfo) > 0 {
		f.all = info.LanguageInfo
	}
	if info == nil {
		f.langs = slices.DeleteFunc(slices.Clone(f.all), func(l agentapi.LanguageInfo) bool { return !l.Default })
		return f
	}
	if f.rootfs == "" {
		f.rootfs = info.DefaultRootfs
	}
	if f.timeoutS == 0 {
		f.timeoutS = info.DefaultLimits.TimeoutMs / 1000
	}
	if s := info.MaxLimits.TimeoutMs / 1000; s > 0 {
		f.maxTimeout = s
	}
	if f.memory == 0 {
		f.memory = info.DefaultLimits.MemoryBytes
	}
	f.stack, f.stackKnown = dataStack(info, f.rootfs)
	names, ok := info.Languages[f.rootfs]
	f.langs = slices.DeleteFunc(slices.Clone(f.all), func(l agentapi.LanguageInfo) bool {
		if !ok {
			return !l.Default
		}
		return !slices.Contains(names, l.Name)
	})
	return f
}

// forks reports whether fork_session can fork the main session: its
// language forks (or the daemon did not say).
func (f facts) forks() bool {
	for _, l := range f.all {
		if l.Default {
			return l.ForkPark
		}
	}
	return true
}

// mainLang names the daemon's default language, whose session run_shell
// and the file tools share; "" when the daemon did not say.
func (f facts) mainLang() string {
	for _, l := range f.all {
		if l.Default {
			return l.Name
		}
	}
	return ""
}

// mainTool names the run tool of the daemon's default language.
func (f facts) mainTool() string {
	if l := f.mainLang(); l != "" {
		return RunTool(l)
	}
	return ToolRunShell
}

// dataStack returns the modules the daemon pre-imports on rootfs and
// could: its zygote's, else its warm pools'. known is false when neither
// has tried (no zygote or pool for it, or still starting).
func dataStack(info *agentapi.Info, rootfs string) (modules []string, known bool) {
	for _, z := range info.Zygotes {
		if z.Rootfs != rootfs {
			continue
		}
		switch z.State {
		case "unused": // the rootfs has none of the modules
			return nil, true
		case "ready", "restarting":
			return imported(z.Modules, z.Skipped), true
		}
	}
	for _, p := range info.Pools {
		if p.Rootfs == rootfs && len(p.Preimport) > 0 && (p.Ready > 0 || p.Refills > 0) {
			return imported(p.Preimport, p.Skipped), true
		}
	}
	return nil, false
}

// imported lists the top-level names of the modules not skipped.
func imported(modules, skipped []string) []string {
	var out []string
	for _, m := range modules {
		if slices.Contains(skipped, m) {
			continue
		}
		top, _, _ := strings.Cut(m, ".")
		if !slices.Contains(out, top) {
			out = append(out, top)
		}
	}
	return out
}

// environment describes the rootfs and the packages its zygote imports,
// for the run tool of a language the zygote forks.
func (f facts) environment() string {
	switch {
	case !f.stackKnown:
		here := ""
		if f.rootfs != "" {
			here = " (here: " + f.rootfs + ")"
		}
		return "Which third-party packages are installed depends on the rootfs" + here +
			"; the data-science one has numpy, pandas, matplotlib, scipy and scikit-learn: try an import. "
	case len(f.stack) == 0:
		return "The rootfs (" + f.rootfs + ") has the Python standard library only: no numpy, pandas or matplotlib. "
	}
	return "Installed and pre-imported on the rootfs (" + f.rootfs + "), besides the standard library: " + strings.Join(f.stack, ", ") + ". "
}

// limits describes a call's limits.
func (f facts) limits() string {
	var l []string
	if f.timeoutS > 0 {
		l = append(l, fmt.Sprintf("a call is stopped after %d s unless timeout_s says otherwise (at most %d s)", f.timeoutS, f.maxTimeout))
	} else {
		l = append(l, fmt.Sprintf("timeout_s may be up to %d s", f.maxTimeout))
	}
	if f.memory > 0 {
		l = append(l, "the sandbox has "+sizeText(f.memory)+" of memory")
	}
	l = append(l, "the first "+sizeText(f.output)+" of stdout and of stderr come back, and code that writes more is stopped")
	return "Limits: " + strings.Join(l, "; ") + ". "
}

// timeoutText describes timeout_s.
func (f facts) timeoutText(what string) string {
	def := "the daemon's"
	if f.timeoutS > 0 {
		def = fmt.Sprintf("%d", f.timeoutS)
	}
	return fmt.Sprintf("Whole seconds, 1 to %d, before %s (default: %s).", f.maxTimeout, what, def)
}

// explainShell replaces the error of a shell result that a limit stopped
// with one that names the limit and what to do.
func (f facts) explainShell(out *ShellResult) {
	switch out.Status {
	case agentapi.StatusTimeout:
		out.Error = "the command ran past its timeout and was killed; make it faster or pass a larger timeout_s"
	case agentapi.StatusOOM:
		out.Error = "the sandbox ran out of memory" + f.memoryText() + " and the command was killed; use less data or process it in chunks"
	case agentapi.StatusOutputLimit:
		out.Error = "the command's output passed the cap of " + sizeText(f.output) + " per stream and the command was stopped; " +
			"redirect large output to a file and look at parts of it (head, tail, grep)"
	default:
		return
	}
	if out.ExitCode == 0 {
		out.ExitCode = -1
	}
}

// memoryText names the memory limit for a message, "" when unknown.
func (f facts) memoryText() string {
	if f.memory == 0 {
		return ""
	}
	return " (" + sizeText(f.memory) + ")"
}

// sizeText formats n bytes in the largest binary unit that divides it.
func sizeText(n int64) string {
	units := []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}}
	for _, u := range units {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
