package output

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Log logs a process's own output (a zygote should have none: warnings of
// its imports at most), keeping the last of it for error messages.
type Log struct {
	log  *slog.Logger
	msg  string
	mu   sync.Mutex
	last []byte
}

// NewLog returns a Log writing lines as msg to log.
func NewLog(log *slog.Logger, msg string) *Log { return &Log{log: log, msg: msg} }

func (w *Log) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = append(w.last, p...)
	if len(w.last) > 4096 {
		w.last = w.last[len(w.last)-4096:]
	}
	w.log.Warn(w.msg, "text", strings.TrimSpace(string(p)))
	return len(p), nil
}

// Tail is the last of the output, as "; output: ..." for an error
// message, or "".
func (w *Log) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return ""
	}
	return "; output: " + string(bytes.TrimSpace(w.last))
}
