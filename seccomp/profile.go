package seccomp

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

//go:embed default.json
var defaultJSON []byte

// maxProfileSize bounds what Load reads; Docker's profile is ~20 KiB.
const maxProfileSize = 4 << 20

// Profile is a seccomp policy in Docker's JSON format (moby/profiles
// seccomp/default.json).
type Profile struct {
	// DefaultAction applies to every syscall no entry matches.
	DefaultAction Action `json:"defaultAction"`
	// DefaultErrnoRet is the errno for an SCMP_ACT_ERRNO DefaultAction;
	// nil means EPERM.
	DefaultErrnoRet *uint `json:"defaultErrnoRet,omitempty"`
	// Architectures and ArchMap are validated but only the native
	// architecture is compiled: every other ABI is killed.
	Architectures []Arch     `json:"architectures,omitempty"`
	ArchMap       []ArchSpec `json:"archMap,omitempty"`
	Syscalls      []Syscall  `json:"syscalls"`
}

// ArchSpec is one archMap entry.
type ArchSpec struct {
	Architecture     Arch   `json:"architecture"`
	SubArchitectures []Arch `json:"subArchitectures"`
}

// Syscall is one rule: Names get Action when all Args match.
type Syscall struct {
	Names []string `json:"names"`
	// Name is the pre-"names" single-name form; it is merged into Names.
	Name     string  `json:"name,omitempty"`
	Action   Action  `json:"action"`
	ErrnoRet *uint   `json:"errnoRet,omitempty"`
	Args     []Arg   `json:"args,omitempty"`
	Comment  string  `json:"comment,omitempty"`
	Includes *Filter `json:"includes,omitempty"`
	Excludes *Filter `json:"excludes,omitempty"`
}

// Arg is one argument comparison. For SCMP_CMP_MASKED_EQ, Value is the
// mask and ValueTwo the expected result: (arg & Value) == ValueTwo.
type Arg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       Op     `json:"op"`
}

// Filter gates a rule. Includes: all given conditions must hold. Excludes:
// the rule is dropped if any holds. Caps are compared against an empty
// capability set (sandboxed code has none), Arches against the native
// architecture's Go-style name ("amd64", "arm64", ...), MinKernel
// ("major.minor") against uname.
type Filter struct {
	Caps      []string `json:"caps,omitempty"`
	Arches    []string `json:"arches,omitempty"`
	MinKernel string   `json:"minKernel,omitempty"`
}

// Action is a Docker seccomp action name such as "SCMP_ACT_ALLOW".
type Action string

// Op is a Docker comparison operator name such as "SCMP_CMP_EQ".
type Op string

// Arch is a Docker architecture name such as "SCMP_ARCH_X86_64".
type Arch string

// Action names Load accepts. SCMP_ACT_NOTIFY is refused: it needs a
// listener the sandbox does not run.
const (
	ActKill        Action = "SCMP_ACT_KILL"
	ActKillThread  Action = "SCMP_ACT_KILL_THREAD"
	ActKillProcess Action = "SCMP_ACT_KILL_PROCESS"
	ActTrap        Action = "SCMP_ACT_TRAP"
	ActErrno       Action = "SCMP_ACT_ERRNO"
	ActTrace       Action = "SCMP_ACT_TRACE"
	ActAllow       Action = "SCMP_ACT_ALLOW"
	ActLog         Action = "SCMP_ACT_LOG"
)

// Comparison operators Load accepts.
const (
	OpNotEqual     Op = "SCMP_CMP_NE"
	OpLessThan     Op = "SCMP_CMP_LT"
	OpLessEqual    Op = "SCMP_CMP_LE"
	OpEqualTo      Op = "SCMP_CMP_EQ"
	OpGreaterEqual Op = "SCMP_CMP_GE"
	OpGreaterThan  Op = "SCMP_CMP_GT"
	OpMaskedEqual  Op = "SCMP_CMP_MASKED_EQ"
)

func (a Action) valid() bool {
	switch a {
	case ActKill, ActKillThread, ActKillProcess, ActTrap, ActErrno, ActTrace, ActAllow, ActLog:
		return true
	}
	return false
}

func (o Op) valid() bool {
	switch o {
	case OpNotEqual, OpLessThan, OpLessEqual, OpEqualTo, OpGreaterEqual, OpGreaterThan, OpMaskedEqual:
		return true
	}
	return false
}

// archShortName maps Docker's SCMP_ARCH_* names to the Go-style names used
// in includes/excludes and reported by libseccomp for the native arch.
func archShortName(a Arch) (string, bool) {
	for _, p := range knownArches() {
		if p[0] == string(a) {
			return p[1], true
		}
	}
	return "", false
}

func validShortArch(name string) bool {
	for _, p := range knownArches() {
		if p[1] == name {
			return true
		}
	}
	return false
}

func knownArches() [][2]string {
	return [][2]string{
		{"SCMP_ARCH_X86", "x86"},
		{"SCMP_ARCH_X86_64", "amd64"},
		{"SCMP_ARCH_X32", "x32"},
		{"SCMP_ARCH_ARM", "arm"},
		{"SCMP_ARCH_AARCH64", "arm64"},
		{"SCMP_ARCH_MIPS", "mips"},
		{"SCMP_ARCH_MIPS64", "mips64"},
		{"SCMP_ARCH_MIPS64N32", "mips64n32"},
		{"SCMP_ARCH_MIPSEL", "mipsel"},
		{"SCMP_ARCH_MIPSEL64", "mipsel64"},
		{"SCMP_ARCH_MIPSEL64N32", "mipsel64n32"},
		{"SCMP_ARCH_PPC", "ppc"},
		{"SCMP_ARCH_PPC64", "ppc64"},
		{"SCMP_ARCH_PPC64LE", "ppc64le"},
		{"SCMP_ARCH_S390", "s390"},
		{"SCMP_ARCH_S390X", "s390x"},
		{"SCMP_ARCH_PARISC", "parisc"},
		{"SCMP_ARCH_PARISC64", "parisc64"},
		{"SCMP_ARCH_RISCV64", "riscv64"},
		{"SCMP_ARCH_LOONGARCH64", "loong64"},
		{"SCMP_ARCH_M68K", "m68k"},
		{"SCMP_ARCH_SH", "sh"},
		{"SCMP_ARCH_SHEB", "sheb"},
	}
}

// Default returns the embedded default profile: Docker's default minus
// everything doc.go lists. Each call returns a fresh copy.
func Default() (*Profile, error) {
	p, err := Load(bytes.NewReader(defaultJSON))
	if err != nil {
		return nil, fmt.Errorf("embedded default.json: %w", err)
	}
	return p, nil
}

// Load parses and validates a Docker-format JSON profile. It is strict:
// unknown fields, actions, operators, architectures, argument indexes past
// 5, errnoRet on an action that takes none, and two comparisons on one
// argument in a single entry are all errors wrapping ErrInvalidProfile.
func Load(r io.Reader) (*Profile, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read: %w", ErrInvalidProfile, err)
	}
	if len(data) > maxProfileSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidProfile, maxProfileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidProfile, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidProfile)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidProfile, err)
	}
	return &p, nil
}

func (p *Profile) validate() error {
	if p.DefaultAction == "" {
		return fmt.Errorf("defaultAction is missing")
	}
	if err := checkAction(p.DefaultAction, p.DefaultErrnoRet); err != nil {
		return fmt.Errorf("defaultAction: %w", err)
	}
	for _, a := range p.Architectures {
		if _, ok := archShortName(a); !ok {
			return fmt.Errorf("architectures: unknown architecture %q", a)
		}
	}
	for i, m := range p.ArchMap {
		if _, ok := archShortName(m.Architecture); !ok {
			return fmt.Errorf("archMap[%d]: unknown architecture %q", i, m.Architecture)
		}
		for _, a := range m.SubArchitectures {
			if _, ok := archShortName(a); !ok {
				return fmt.Errorf("archMap[%d]: unknown subArchitecture %q", i, a)
			}
		}
	}
	for i := range p.Syscalls {
		if err := p.Syscalls[i].validate(); err != nil {
			return fmt.Errorf("syscalls[%d]: %w", i, err)
		}
	}
	return nil
}

func (s *Syscall) validate() error {
	if s.Name != "" {
		s.Names = append(s.Names, s.Name)
		s.Name = ""
	}
	if len(s.Names) == 0 {
		return fmt.Errorf("no syscall names")
	}
	for _, n := range s.Names {
		if n == "" {
			return fmt.Errorf("empty syscall name")
		}
	}
	if s.Action == "" {
		return fmt.Errorf("%s: action is missing", s.Names[0])
	}
	if err := checkAction(s.Action, s.ErrnoRet); err != nil {
		return fmt.Errorf("%s: %w", s.Names[0], err)
	}
	var seen [6]bool
	for j, a := range s.Args {
		if a.Index > 5 {
			return fmt.Errorf("%s: args[%d]: index %d out of range 0-5", s.Names[0], j, a.Index)
		}
		if !a.Op.valid() {
			return fmt.Errorf("%s: args[%d]: unknown op %q", s.Names[0], j, a.Op)
		}
		if a.Op != OpMaskedEqual && a.ValueTwo != 0 {
			return fmt.Errorf("%s: args[%d]: valueTwo is only used by %s", s.Names[0], j, OpMaskedEqual)
		}
		if seen[a.Index] {
			return fmt.Errorf("%s: args[%d]: second comparison on argument %d; libseccomp cannot AND them, split the entry", s.Names[0], j, a.Index)
		}
		seen[a.Index] = true
	}
	for _, f := range []struct {
		what string
		f    *Filter
	}{{"includes", s.Includes}, {"excludes", s.Excludes}} {
		if f.f == nil {
			continue
		}
		for _, a := range f.f.Arches {
			if !validShortArch(a) {
				return fmt.Errorf("%s: %s: unknown arch %q", s.Names[0], f.what, a)
			}
		}
		for _, c := range f.f.Caps {
			if !strings.HasPrefix(c, "CAP_") {
				return fmt.Errorf("%s: %s: capability %q does not start with CAP_", s.Names[0], f.what, c)
			}
		}
		if f.f.MinKernel != "" {
			if _, err := parseKernelVersion(f.f.MinKernel); err != nil {
				return fmt.Errorf("%s: %s: minKernel: %w", s.Names[0], f.what, err)
			}
		}
	}
	return nil
}

func checkAction(a Action, errnoRet *uint) error {
	if a == "SCMP_ACT_NOTIFY" {
		return fmt.Errorf("action %q is not supported: the sandbox runs no seccomp listener", a)
	}
	if !a.valid() {
		return fmt.Errorf("unknown action %q", a)
	}
	if errnoRet != nil {
		if a != ActErrno && a != ActTrace {
			return fmt.Errorf("errnoRet %d given for %s, which takes none", *errnoRet, a)
		}
		if *errnoRet > 4095 {
			return fmt.Errorf("errnoRet %d out of range 0-4095", *errnoRet)
		}
	}
	return nil
}

// kernelVersion is major.minor, enough for Docker's minKernel.
type kernelVersion struct{ major, minor int }

func (v kernelVersion) less(o kernelVersion) bool {
	return v.major < o.major || (v.major == o.major && v.minor < o.minor)
}

// parseKernelVersion reads "6.18", "6.18.0" or a uname release such as
// "6.1.0-28-amd64".
func parseKernelVersion(s string) (kernelVersion, error) {
	rest := s
	if i := strings.IndexFunc(rest, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		rest = rest[:i]
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 2 {
		return kernelVersion{}, fmt.Errorf("kernel version %q is not major.minor", s)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return kernelVersion{}, fmt.Errorf("kernel version %q is not major.minor", s)
	}
	return kernelVersion{major, minor}, nil
}
