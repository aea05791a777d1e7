package agentapi

// Stream event types, in the order a stream carries them: one "start", any
// number of "stdout"/"stderr" chunks in production order, then exactly one
// "result" or one "error".
const (
	EventStart  = "start"
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventResult = "result"
	EventError  = "error"
)

// Event is one line of an application/x-ndjson run stream.
//
// A stdout/stderr chunk carries Data when it is valid UTF-8 (multi-byte
// characters are never split across chunks) and DataBase64 otherwise.
type Event struct {
	Type       string     `json:"type"`
	ID         string     `json:"id,omitempty"`   // "start": the run id
	Data       string     `json:"data,omitempty"` // "stdout", "stderr"
	DataBase64 string     `json:"data_base64,omitempty"`
	Result     *RunResult `json:"result,omitempty"` // "result"
	Error      *Error     `json:"error,omitempty"`  // "error"
}
