package zyproto

import (
	"encoding/json"
	"slices"
	"testing"
)

// HoldArgs sends a held argument as its index and leaves the rest, and
// the caller's argv, as they were.
func TestHoldArgs(t *testing.T) {
	held := map[string]string{"SOURCE": "RUNNER_SOURCE", "other": "OTHER"}
	argv := []string{"python3", "-I", "-c", "boot", "SOURCE", "x"}
	run := HoldArgs(Run{Argv: argv, Env: []string{"A=1"}}, held)
	if want := []string{"python3", "-I", "-c", "boot", "", "x"}; !slices.Equal(run.Argv, want) {
		t.Errorf("argv %q, want %q", run.Argv, want)
	}
	if len(run.Held) != 1 || run.Held[4] != "RUNNER_SOURCE" {
		t.Errorf("held %v, want argument 4 as RUNNER_SOURCE", run.Held)
	}
	if argv[4] != "SOURCE" {
		t.Error("HoldArgs changed the caller's argv")
	}
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"argv":["python3","-I","-c","boot","","x"],"env":["A=1"],"held":{"4":"RUNNER_SOURCE"}}`; string(b) != want {
		t.Errorf("frame %s, want %s", b, want)
	}
	if run := HoldArgs(Run{Argv: []string{"python3", "-c", "x"}}, held); run.Held != nil {
		t.Errorf("nothing held: %v", run.Held)
	}
}
