package runner

import (
	"bytes"
	"testing"
)

func TestSink(t *testing.T) {
	marker := []byte("<<END>>")
	tests := []struct {
		name   string
		writes []string
		want   string
		seen   bool
	}{
		{"marker alone", []string{"<<END>>"}, "", true},
		{"text then marker", []string{"hello\n<<END>>"}, "hello\n", true},
		{"split marker", []string{"ab<<E", "ND>>"}, "ab", true},
		{"split one byte at a time", []string{"x", "<", "<", "E", "N", "D", ">", ">"}, "x", true},
		{"false start", []string{"a<<E", "X<<END>>"}, "a<<EX", true},
		{"after marker dropped", []string{"a<<END>>late"}, "a", true},
		{"no marker: tail flushed at end", []string{"a<<EN"}, "a<<EN", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s sink
			var streamed bytes.Buffer
			seen, _ := s.begin(marker, 1<<20, func(b []byte) { streamed.Write(b) })
			for _, w := range tc.writes {
				s.Write([]byte(w))
			}
			got := false
			select {
			case <-seen:
				got = true
			default:
			}
			data, total, trunc := s.end()
			if string(data) != tc.want || streamed.String() != tc.want || total != int64(len(tc.want)) || trunc || got != tc.seen {
				t.Fatalf("data %q streamed %q total %d trunc %v seen %v; want %q seen %v", data, streamed.String(), total, trunc, got, tc.want, tc.seen)
			}
		})
	}
}

func TestSinkCap(t *testing.T) {
	var s sink
	var streamed bytes.Buffer
	_, over := s.begin([]byte("#"), 3, func(b []byte) { streamed.Write(b) })
	s.Write([]byte("ab"))
	select {
	case <-over:
		t.Fatal("over closed below the cap")
	default:
	}
	s.Write([]byte("cdef#"))
	data, total, trunc := s.end()
	if string(data) != "abc" || total != 6 || !trunc || streamed.String() != "abc" {
		t.Fatalf("%q %d %v, streamed %q", data, total, trunc, streamed.String())
	}
	select {
	case <-over:
	default:
		t.Fatal("over not closed past the cap")
	}
	// Between cells output is dropped.
	s.Write([]byte("stray"))
	s.begin([]byte("#"), 10, nil)
	s.Write([]byte("ok#"))
	if data, _, _ := s.end(); string(data) != "ok" {
		t.Fatalf("%q", data)
	}
}

func TestSinkLifetimeCap(t *testing.T) {
	var s sink
	calls := 0
	s.limitLife(10, func() { calls++ })
	s.Write([]byte("between cells"[:8])) // 8: below the cap
	if calls != 0 {
		t.Fatalf("called at 8 of 10 bytes")
	}
	// Bytes past a cell's own cap do not count.
	s.begin([]byte("#"), 1, nil)
	s.Write([]byte("abcdefgh#"))
	if calls != 0 {
		t.Fatalf("called for bytes past the cell's cap")
	}
	s.Write([]byte("more"))
	if calls != 1 {
		t.Fatalf("called %d times past the lifetime cap, want 1", calls)
	}
}
