package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
	"github.com/nsbox/nsbox/daemon/config/netconf"
	"github.com/nsbox/nsbox/daemon/lang"
)

// parse reads a TOML config file over cfg and returns every
// problem it finds with its line: unknown keys, keys set twice, values of
// the wrong type or out of range. A syntax error ends the parse (the rest
// of the file cannot be read reliably), so it is reported alone with what
// came before it. cfg.lines records where each key was set.
func parse(data []byte, cfg *Config) []Error {
	w := &configWalker{cfg: cfg, seenTables: map[string]int{}}
	w.p.Reset(data)
	var table []string
	skipTable := false
	for w.p.NextExpression() {
		e := w.p.Expression()
		switch e.Kind {
		case unstable.Table:
			table = w.keyParts(e.Key())
			line := w.keyLine(e.Key())
			name := strings.Join(table, ".")
			skipTable = false
			if first, ok := w.seenTables[name]; ok {
				w.errorf(line, name, "table [%s] defined twice (first on line %d)", name, first)
				skipTable = true
				continue
			}
			w.seenTables[name] = line
			if msg := checkTable(table); msg != "" {
				w.errorf(line, name, "%s", msg)
				skipTable = true
			}
		case unstable.ArrayTable:
			table = w.keyParts(e.Key())
			skipTable = true
			if len(table) == 1 && table[0] == "datasets" {
				w.cfg.Datasets = append(w.cfg.Datasets, Dataset{})
				table = []string{"datasets[" + strconv.Itoa(len(w.cfg.Datasets)-1) + "]"}
				skipTable = false
				continue
			}
			w.errorf(w.keyLine(e.Key()), strings.Join(table, "."), "unknown array of tables [[%s]]; the only one is [[datasets]]", strings.Join(table, "."))
		case unstable.KeyValue:
			if skipTable {
				continue
			}
			key := append(append([]string(nil), table...), w.keyParts(e.Key())...)
			w.set(key, e.Value(), w.keyLine(e.Key()))
		}
	}
	if err := w.p.Error(); err != nil {
		line := 0
		if pe, ok := err.(*unstable.ParserError); ok {
			line = w.offsetLine(data, pe.Highlight)
		}
		w.errs = append(w.errs, Error{Line: line, Msg: "TOML syntax: " + err.Error()})
	}
	return w.errs
}

// checkTable says what is wrong with a [table] header, or "".
func checkTable(t []string) string {
	switch {
	case len(t) == 1 && (t[0] == "default_limits" || t[0] == "max_limits" || t[0] == "profiles"):
		return ""
	case len(t) == 2 && t[0] == "profiles":
		return profileNameError(t[1])
	case len(t) == 1 && (t[0] == "sessions" || t[0] == "pool" || t[0] == "pools" || t[0] == "zygote" || t[0] == "network" || t[0] == "e2b" || t[0] == "security" || t[0] == "volumes" || t[0] == "budgets"):
		return ""
	case len(t) == 1 && t[0] == "languages":
		return ""
	case len(t) == 2 && t[0] == "languages":
		if err := lang.ValidName(t[1]); err != nil {
			return err.Error()
		}
		return ""
	case len(t) == 2 && t[0] == "network" && (t[1] == "hosts" || t[1] == "secrets"):
		return ""
	case len(t) == 3 && t[0] == "network" && t[1] == "secrets":
		if err := netconf.ValidSecretName(t[2]); err != nil {
			return err.Error()
		}
		return ""
	case len(t) == 2 && t[0] == "pools":
		if t[1] == defaultPoolName {
			return "the default pool is configured in [pool]"
		}
		return profileNameError(t[1])
	}
	return fmt.Sprintf("unknown table [%s]; the tables are [default_limits], [max_limits], [profiles.NAME], [sessions], [pool], [pools.NAME], [zygote], [network], [network.hosts], [network.secrets.NAME], [languages.NAME], [e2b], [security], [volumes] and [budgets]", strings.Join(t, "."))
}

type configWalker struct {
	p          unstable.Parser
	cfg        *Config
	errs       []Error
	seenTables map[string]int
}

func (w *configWalker) errorf(line int, key, format string, args ...any) {
	w.errs = append(w.errs, Error{Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (w *configWalker) keyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

// keyLine is the line of a key's first part.
func (w *configWalker) keyLine(it unstable.Iterator) int {
	if !it.Next() {
		return 0
	}
	return w.p.Shape(it.Node().Raw).Start.Line
}

// offsetLine finds the line of b, a subslice of data, or 0.
func (w *configWalker) offsetLine(data, b []byte) int {
	off := cap(data) - cap(b)
	if b == nil || off < 0 || off > len(data) {
		return 0
	}
	return strings.Count(string(data[:off]), "\n") + 1
}

// set stores the value v of key (a full dotted path), reporting unknown
// keys, repeats and bad values.
func (w *configWalker) set(key []string, v *unstable.Node, line int) {
	name := strings.Join(key, ".")
	if v.Kind == unstable.InlineTable {
		it := v.Children()
		for it.Next() {
			kv := it.Node()
			if kv.Kind != unstable.KeyValue {
				continue
			}
			sub := append(append([]string(nil), key...), w.keyParts(kv.Key())...)
			w.set(sub, kv.Value(), w.keyLine(kv.Key()))
		}
		return
	}
	if first, ok := w.cfg.lines[name]; ok {
		w.errorf(line, name, "set twice (first on line %d)", first)
		return
	}
	w.cfg.lines[name] = line
	if err := w.cfg.setKey(key, v); err != nil {
		w.errorf(line, name, "%v", err)
	}
}

// setKey stores one value; the error says what is wrong with it.
func (cfg *Config) setKey(key []string, v *unstable.Node) error {
	if len(key) == 2 && strings.HasPrefix(key[0], "datasets[") {
		i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(key[0], "datasets["), "]"))
		if err != nil || i < 0 || i >= len(cfg.Datasets) {
			return fmt.Errorf("unknown key; see scripts/nsbox.conf.example for the keys")
		}
		return cfg.setDatasetKey(i, key[1], v)
	}
	switch {
	case len(key) >= 2 && (key[0] == "pool" || key[0] == "pools"):
		return cfg.setPoolKey(key, v)
	case len(key) == 2 && key[0] == "sessions":
		return cfg.setSessionsKey(key[1], v)
	case len(key) == 2 && key[0] == "zygote":
		return cfg.setZygoteKey(key[1], v)
	case len(key) == 2 && key[0] == "e2b":
		return cfg.setE2BKey(key[1], v)
	case len(key) == 2 && key[0] == "security":
		return cfg.setSecurityKey(key[1], v)
	case len(key) == 2 && key[0] == "volumes":
		return cfg.setVolumesKey(key[1], v)
	case len(key) == 2 && key[0] == "budgets":
		return cfg.setBudgetsKey(key[1], v)
	case len(key) >= 2 && key[0] == "network":
		return cfg.Network.SetKey(key, v)
	case len(key) == 3 && key[0] == "languages":
		return cfg.setLanguageKey(key[1], key[2], v)
	case len(key) == 2 && key[0] == "languages":
		return fmt.Errorf("must be a table ([languages.%s])", key[1])
	case len(key) == 1:
		if dst, ok := cfg.stringKeys()[key[0]]; ok {
			s, err := tomlval.String(v)
			if err != nil {
				return err
			}
			*dst = s
			return nil
		}
		switch key[0] {
		case "max_concurrent":
			n, err := tomlval.IntIn(v, 1, 1<<16, "")
			if err != nil {
				return err
			}
			cfg.MaxConcurrent = int(n)
		case "queue":
			n, err := tomlval.IntIn(v, 0, 1<<20, "(no queue)")
			if err != nil {
				return err
			}
			q := int(n)
			cfg.Queue = &q
		case "shutdown_grace":
			d, err := tomlval.Duration(v)
			if err != nil {
				return err
			}
			cfg.ShutdownGrace = d
		case "default_limits", "max_limits", "profiles", "sessions", "pool", "pools", "zygote", "network", "languages", "e2b", "security", "volumes", "budgets":
			return fmt.Errorf("must be a table ([%s])", key[0])
		case "datasets":
			return fmt.Errorf("must be an array of tables ([[datasets]], one per dataset)")
		default:
			return fmt.Errorf("unknown key; see scripts/nsbox.conf.example for the keys")
		}
		return nil
	case len(key) == 2 && key[0] == "default_limits":
		return setLimit(&cfg.DefaultLimits, key[1], v)
	case len(key) == 2 && key[0] == "max_limits":
		return setLimit(&cfg.MaxLimits, key[1], v)
	case len(key) == 3 && key[0] == "profiles":
		if msg := profileNameError(key[1]); msg != "" {
			return fmt.Errorf("%s", msg)
		}
		pr := cfg.profile(key[1])
		if key[2] == "network" {
			l, err := tomlval.Strings(v, `["pypi.org", "files.pythonhosted.org"]`)
			if err != nil {
				return err
			}
			pr.Network = &agentapi.Network{Allow: l}
			return nil
		}
		if key[2] == "description" {
			s, err := tomlval.String(v)
			if err != nil {
				return err
			}
			pr.Description = s
			return nil
		}
		return setLimit(&pr.Limits, key[2], v)
	case len(key) == 2 && key[0] == "profiles":
		return fmt.Errorf("must be a table ([profiles.%s])", key[1])
	}
	return fmt.Errorf("unknown key; see scripts/nsbox.conf.example for the keys")
}

func profileNameError(name string) string {
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return fmt.Sprintf("profile name %q: use 1 to 64 of a-z, 0-9, _ and -", name)
	}
	return ""
}

// setLimit stores one limit key (a key of the limits table: timeout,
// memory, pids, cpus, disk, output), checked against its row's range.
func setLimit(l *agentapi.Limits, key string, v *unstable.Node) error {
	r, ok := limits.Lookup(key)
	if !ok || r.Key != key {
		keys := make([]string, len(limits.Table))
		for i, r := range limits.Table {
			keys[i] = r.Key
		}
		return fmt.Errorf("unknown limit; the limits are %s", strings.Join(keys, ", "))
	}
	var x float64
	switch r.Unit {
	case limits.Millis:
		d, err := tomlval.Duration(v)
		if err != nil {
			return err
		}
		x = float64(d) / float64(time.Millisecond)
	case limits.Bytes:
		n, err := tomlval.Size(v)
		if err != nil {
			return err
		}
		x = float64(n)
	case limits.Count:
		n, err := tomlval.Int(v)
		if err != nil {
			return err
		}
		x = float64(n)
	case limits.Cores:
		f, err := tomlval.Float(v)
		if err != nil {
			return err
		}
		x = f
	}
	switch {
	case x == 0:
		return fmt.Errorf("must be positive (leave the key out for the default)")
	case r.Ceiling > 0 && x > r.Ceiling:
		return fmt.Errorf("%s: must be between %s and %s", r.Format(x), r.Format(r.Min), r.Format(r.Ceiling))
	}
	if err := r.Check(x); err != nil {
		return fmt.Errorf("%s: must be at least %s", r.Format(x), r.Format(r.Min))
	}
	r.SetWire(l, x)
	return nil
}
