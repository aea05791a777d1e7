package runner

import "testing"

func TestKinds(t *testing.T) {
	for _, tc := range []struct {
		l                                                                    Language
		forks, snapshots, allowList, agent, contexts, cheap, strips, dedents bool
	}{
		{"", true, true, true, true, true, true, false, true},
		{Python, true, true, true, true, true, true, false, true},
		{JavaScript, false, false, false, false, false, false, true, false},
	} {
		got := [...]bool{tc.l.Forks(), tc.l.Snapshots(), tc.l.AllowList(), tc.l.Agent(), tc.l.Contexts(), tc.l.CheapInterrupt(), tc.l.Takes(StripTypes), tc.l.Dedents()}
		want := [...]bool{tc.forks, tc.snapshots, tc.allowList, tc.agent, tc.contexts, tc.cheap, tc.strips, tc.dedents}
		if got != want {
			t.Errorf("%q: %v, want %v", tc.l, got, want)
		}
	}
	if Python.Takes("") || JavaScript.Takes("") {
		t.Error(`"" is no transform; Takes is for a transform`)
	}
	if Language("").Or() != Python || JavaScript.Or() != JavaScript {
		t.Error("Or")
	}
}
