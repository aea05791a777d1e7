package config

import (
	"fmt"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/agentapi/limits"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
)

// The defaults of [budgets]: the daemon's and httpkit's own (the daemon's
// DefaultResultBytes; twice httpkit's 64 MiB body cap), said again here so
// that the file's keys, --check-config and docs/OPERATIONS.md's sizing
// agree on them; TestBudgetDefaults holds them together.
const (
	DefaultResultBudget = 256 << 20
	DefaultBodyBudget   = 128 << 20
)

// The ranges of [budgets]. A result budget below two of the largest
// answers (2 × 64 MiB) runs such runs one at a time; one below 16 MiB
// would do so for runs of a few MiB. A body budget below one body at its
// 64 MiB cap would refuse nothing more (one body always fits) and only
// mislead.
const (
	minResultBudget = 16 << 20
	minBodyBudget   = 64 << 20
	maxBudget       = 64 << 30
	maxPerSecond    = 1 << 16
)

// BudgetsConfig is [budgets]: what the daemon holds for all its clients
// together, and how fast one client may open connections. They apply at
// start (RestartKeys).
type BudgetsConfig struct {
	// ResultBytes (results) bounds the run results held at once: a run
	// whose output_bytes is above the 1 MiB default reserves twice it
	// before it starts, until its answer is written.
	ResultBytes int64
	// BodyBytes (bodies) bounds the request bodies held in memory at
	// once, /v1 and the E2B endpoint together; past it 429.
	BodyBytes int64
	// PeerConnsPerSecond (peer_conns_per_second) is how many new
	// connections of one peer (a uid on the socket, an address on E2B's
	// port) each listener takes a second; 0: an eighth of the listener's
	// connection budget (128 of 1,024).
	PeerConnsPerSecond int
}

func defaultBudgetsConfig() BudgetsConfig {
	return BudgetsConfig{ResultBytes: DefaultResultBudget, BodyBytes: DefaultBodyBudget}
}

func (b BudgetsConfig) String() string {
	return fmt.Sprintf("results=%d bodies=%d peer_conns_per_second=%d", b.ResultBytes, b.BodyBytes, b.PeerConnsPerSecond)
}

// setBudgetsKey stores a key of [budgets].
func (cfg *Config) setBudgetsKey(key string, v *unstable.Node) error {
	b := &cfg.Budgets
	switch key {
	case "results", "bodies":
		lo, def, dst := int64(minResultBudget), int64(DefaultResultBudget), &b.ResultBytes
		if key == "bodies" {
			lo, def, dst = minBodyBudget, DefaultBodyBudget, &b.BodyBytes
		}
		n, err := tomlval.Size(v)
		if err != nil {
			return err
		}
		if n < lo || n > maxBudget {
			return fmt.Errorf("%s: must be between %s and %s (the default is %s; e.g. %s = \"%dM\")",
				limits.HumanBytes(n), limits.HumanBytes(lo), limits.HumanBytes(maxBudget), limits.HumanBytes(def), key, def>>20)
		}
		*dst = n
	case "peer_conns_per_second":
		n, err := tomlval.IntIn(v, 1, maxPerSecond, "")
		if err != nil {
			return fmt.Errorf("%v (leave it out for an eighth of the connection budget, 128)", err)
		}
		b.PeerConnsPerSecond = int(n)
	default:
		return fmt.Errorf("unknown key; [budgets] has results, bodies and peer_conns_per_second")
	}
	return nil
}
