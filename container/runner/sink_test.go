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
			seen := s.begin(marker, 1<<20, func(b []byte) { streamed.Write(b) })
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
	s.begin([]byte("#"), 3, nil)
	s.Write([]byte("abcdef#"))
	data, total, trunc := s.end()
	if string(data) != "abc" || total != 6 || !trunc {
		t.Fatalf("%q %d %v", data, total, trunc)
	}
	// Between cells output is dropped.
	s.Write([]byte("stray"))
	s.begin([]byte("#"), 10, nil)
	s.Write([]byte("ok#"))
	if data, _, _ := s.end(); string(data) != "ok" {
		t.Fatalf("%q", data)
	}
}
