package runner

// Language is a runner kind: the interpreter a runner runs cells in. The
// languages of the daemon's API (daemon/lang) map onto these; what a
// kind can do is its row of kinds, below.
type Language string

// Languages a runner speaks.
const (
	Python     Language = "python"
	JavaScript Language = "javascript" // Node.js; TypeScript cells too (StripTypes)
)

// Transform is what a runner does to a cell before it runs it; "" is
// nothing. It is the protocol's request.Lang.
type Transform string

// StripTypes makes a Node runner strip a TypeScript cell's types (esbuild,
// in the sandbox; not type-checked).
const StripTypes Transform = "ts"

// kind is what a runner kind can do.
type kind struct {
	name, needs string // in errors: the runner, and the program the rootfs must have
	// forks: a zygote forks the runner (Node cannot be forked safely: it
	// starts cold, and its pools are never renewed from a zygote).
	forks bool
	// snapshots: the runner's state can be carried (fork and park).
	snapshots bool
	// allowList: the daemon offers allowed_imports for it.
	allowList bool
	// agent: the runner forks a process agent (processes beside the
	// interpreter: E2B sandboxes).
	agent bool
	// contexts: E2B's code interpreter runs cells in its contexts.
	contexts bool
	// cheapInterrupt: a cell's timeout interrupts it (Python's
	// KeyboardInterrupt, with its traceback). Node's interrupt of a
	// synchronous cell (breakOnSigint) starts a thread around every cell,
	// ~0.2 ms of a pooled run, so a one-shot Node run is killed instead.
	cheapInterrupt bool
	// dedents: a cell's leading indentation is removed first (Dedent), as
	// a notebook's kernel does (IPython).
	dedents    bool
	transforms []Transform
}

var kinds = map[Language]kind{
	Python:     {name: "Python runner", needs: "python3", forks: true, snapshots: true, allowList: true, agent: true, contexts: true, cheapInterrupt: true, dedents: true},
	JavaScript: {name: "Node.js runner", needs: "node", transforms: []Transform{StripTypes}},
}

func (l Language) kind() kind { return kinds[l.Or()] }

// Or is l, or Python for the zero Language.
func (l Language) Or() Language {
	if l == "" {
		return Python
	}
	return l
}

// Forks reports a runner kind a zygote forks.
func (l Language) Forks() bool { return l.kind().forks }

// Snapshots reports a runner kind whose state can be carried (fork, park).
func (l Language) Snapshots() bool { return l.kind().snapshots }

// AllowList reports a runner kind that takes allowed_imports.
func (l Language) AllowList() bool { return l.kind().allowList }

// Agent reports a runner kind that forks a process agent.
func (l Language) Agent() bool { return l.kind().agent }

// Contexts reports a runner kind whose contexts E2B's code interpreter uses.
func (l Language) Contexts() bool { return l.kind().contexts }

// CheapInterrupt reports a runner kind whose cells are interrupted at
// their timeout rather than killed with the sandbox (ExecRequest.KillOnTimeout).
func (l Language) CheapInterrupt() bool { return l.kind().cheapInterrupt }

// Dedents reports a runner kind whose cells are dedented first (Dedent).
func (l Language) Dedents() bool { return l.kind().dedents }

// Takes reports whether the runner kind applies t to a cell.
func (l Language) Takes(t Transform) bool {
	for _, x := range l.kind().transforms {
		if x == t {
			return true
		}
	}
	return false
}
