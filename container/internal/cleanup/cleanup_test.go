package cleanup

import (
	"slices"
	"testing"
)

func TestCleanRunsInReverseOnce(t *testing.T) {
	var got []int
	cu := Make(func() { got = append(got, 1) })
	cu.Add(nil)
	cu.Add(func() { got = append(got, 2) })
	cu.Clean()
	cu.Clean()
	if want := []int{2, 1}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
}

func TestReleaseHandsTheUndoOver(t *testing.T) {
	var got []int
	var cu Cleanup
	cu.Add(func() { got = append(got, 1) })
	cu.Add(func() { got = append(got, 2) })
	undo := cu.Release()
	cu.Clean()
	if len(got) != 0 {
		t.Fatalf("Clean after Release ran %v", got)
	}
	undo()
	if want := []int{2, 1}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
}
