package watchers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/container/procs"
)

// TestConvert: the agent's operations become envd's event types; entries
// are asked for create, write and chmod only, by the event's sandbox
// path; an overflow ends the batch with ErrOverflow after the events
// before it, which the stream and the poll answer as resource_exhausted.
func TestConvert(t *testing.T) {
	var asked []string
	entry := func(_ context.Context, p string) *filesystem.EntryInfo {
		asked = append(asked, p)
		return &filesystem.EntryInfo{Path: p}
	}
	evs := []procs.WatchEvent{
		{Op: procs.WatchCreate, Name: "a"}, {Op: procs.WatchWrite, Name: "d/a"}, {Op: procs.WatchChmod, Name: "a"},
		{Op: procs.WatchRename, Name: "a"}, {Op: procs.WatchRemove, Name: "b"},
		{Op: procs.WatchOverflow}, {Op: procs.WatchCreate, Name: "after"},
	}
	out, err := convert(context.Background(), "/home/user/w", evs, entry)
	if !errors.Is(err, ErrOverflow) {
		t.Errorf("err %v, want ErrOverflow", err)
	}
	var got []string
	for _, e := range out {
		got = append(got, fmt.Sprintf("%v %s %v", e.GetType(), e.GetName(), e.Entry != nil))
	}
	want := []string{
		"EVENT_TYPE_CREATE a true", "EVENT_TYPE_WRITE d/a true", "EVENT_TYPE_CHMOD a true",
		"EVENT_TYPE_RENAME a false", "EVENT_TYPE_REMOVE b false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if fmt.Sprint(asked) != "[/home/user/w/a /home/user/w/d/a /home/user/w/a]" {
		t.Errorf("entries asked for %v", asked)
	}
	for err, code := range map[error]connect.Code{ErrOverflow: connect.CodeResourceExhausted, procs.ErrClosed: connect.CodeUnavailable} {
		if c := connect.CodeOf(endError(err)); c != code {
			t.Errorf("endError(%v): %v, want %v", err, c, code)
		}
	}
	if err := endError(procs.ErrWatchEnded); err != nil {
		t.Errorf("endError(ErrWatchEnded) = %v, want a clean end", err)
	}
}
