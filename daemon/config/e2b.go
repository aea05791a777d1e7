package config

import (
	"fmt"
	"net"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
)

// E2BConfig is [e2b]: the E2B-compatible endpoint (docs/E2B.md), off
// unless Listen is set.
type E2BConfig struct {
	// Listen is the TCP address ("127.0.0.1:49999") of the endpoint; "":
	// none.
	Listen string
	// KeysFile holds the API keys, one per line; required with Listen.
	KeysFile string
	// NonLoopback lets Listen name an address other than loopback: the
	// operator's deliberate choice, since E2B's protocol is plain HTTP.
	NonLoopback bool
	// KeyRequests (key_requests) bounds one API key's requests in
	// flight, past it 429; 0: half the endpoint's connection budget (512).
	KeyRequests int
}

// setE2BKey stores a key of [e2b].
func (cfg *Config) setE2BKey(key string, v *unstable.Node) error {
	switch key {
	case "listen", "keys_file":
		s, err := tomlval.String(v)
		if err != nil {
			return err
		}
		*map[string]*string{"listen": &cfg.E2B.Listen, "keys_file": &cfg.E2B.KeysFile}[key] = s
	case "non_loopback":
		if v.Kind != unstable.Bool {
			return fmt.Errorf("want true or false, got a TOML %s", tomlval.KindName(v.Kind))
		}
		cfg.E2B.NonLoopback = string(v.Data) == "true"
	case "key_requests":
		n, err := tomlval.IntIn(v, 1, maxPerSecond, "")
		if err != nil {
			return fmt.Errorf("%v (leave it out for half the connection budget, 512)", err)
		}
		cfg.E2B.KeyRequests = int(n)
	default:
		return fmt.Errorf("unknown key; [e2b] has listen, keys_file, non_loopback and key_requests")
	}
	return nil
}

// checkE2B reports what is wrong with [e2b].
func (cfg *Config) checkE2B(bad func(key, format string, args ...any)) {
	e := cfg.E2B
	if e.Listen == "" {
		return
	}
	host, _, err := net.SplitHostPort(e.Listen)
	if err != nil {
		bad("e2b.listen", "%q: want HOST:PORT, e.g. 127.0.0.1:49999: %v", e.Listen, err)
		return
	}
	if ip := net.ParseIP(host); !e.NonLoopback && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		bad("e2b.listen", "%q is not a loopback address: E2B's protocol is plain HTTP with bearer keys; set [e2b] non_loopback = true to listen there on purpose", e.Listen)
	}
	if e.KeysFile == "" {
		bad("e2b.keys_file", "[e2b] listen needs keys_file: a root-owned file (mode 0600) with one API key per line, e2b_ and hex digits (e.g. from: echo e2b_$(openssl rand -hex 20))")
	}
}
