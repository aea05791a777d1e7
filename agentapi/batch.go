package agentapi

// MaxBatchRuns is the most runs one batch may hold.
const MaxBatchRuns = 10000

// BatchRequest is the body of POST /v1/runs:batch: independent runs, each
// validated and limited as a POST /v1/runs would be, run at most
// Concurrency at a time.
type BatchRequest struct {
	Runs []RunRequest `json:"runs"`
	// Concurrency is how many of the batch's runs go at once: 1 to the
	// daemon's max_concurrent; 0 means max_concurrent.
	Concurrency int `json:"concurrency,omitempty"`
}

// Batch answer line types: one "result" or "error" per run, in the order
// the runs finish, then one "done".
const (
	BatchResult = "result"
	BatchError  = "error"
	BatchDone   = "done"
)

// BatchItem is one line of a batch's application/x-ndjson answer.
type BatchItem struct {
	Type string `json:"type"`
	// Index is the run's position in BatchRequest.Runs (-1 on "done").
	Index  int           `json:"index"`
	Result *RunResult    `json:"result,omitempty"` // "result": the run ended (ok or not)
	Error  *Error        `json:"error,omitempty"`  // "error": the run could not be run (invalid, cancelled)
	Done   *BatchSummary `json:"done,omitempty"`   // "done"
}

// BatchSummary closes a batch's answer.
type BatchSummary struct {
	Runs   int   `json:"runs"`   // runs in the request
	OK     int   `json:"ok"`     // results with status "ok"
	Failed int   `json:"failed"` // results with another status (exception, timeout, ...)
	Errors int   `json:"errors"` // runs answered with an error
	WallMs int64 `json:"wall_ms"`
}
