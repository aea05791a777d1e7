package mcp

import (
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
)

// Tool names besides the run tools (RunTool).
const (
	ToolRunShell     = "run_shell"
	ToolWriteFile    = "write_file"
	ToolReadFile     = "read_file"
	ToolListFiles    = "list_files"
	ToolResetSession = "reset_session"
	// ToolForkSession branches the conversation's main session
	// (per-connection mode only, where the default language forks).
	ToolForkSession = "fork_session"
)

// Bounds of the tools' inputs.
const (
	MaxTimeoutS       = 600 // timeout_s's bound when the daemon's maximum is unknown
	MaxCodeBytes      = 1 << 20
	MaxContentBytes   = 16 << 20 // write_file content as sent (base64 included)
	MaxPathBytes      = 4096
	maxReadBytes      = 16 << 20 // read_file refuses larger files
	maxReadTextBytes  = 256 << 10
	maxListedFiles    = 1000
	workspacePrefix   = "/workspace/"
	encodingUTF8      = "utf-8"
	encodingBase64    = "base64"
	defaultOutputSize = 128 << 10
)

// RunShellInput is the input of run_shell.
type RunShellInput struct {
	Command   string `json:"command" jsonschema:"Shell command line, run with bash -c (sh when bash is absent) in /workspace. The root filesystem is read-only, /workspace and /tmp are writable."`
	SessionID string `json:"session_id,omitempty" jsonschema:"Run in this existing nsbox session instead of this conversation's own one (leave empty normally)."`
	TimeoutS  int    `json:"timeout_s,omitempty" jsonschema:"Whole seconds before the command is killed."`
}

// WriteFileInput is the input of write_file.
type WriteFileInput struct {
	Path      string `json:"path" jsonschema:"Destination path relative to /workspace (e.g. data/input.csv); parent directories are created. Absolute paths outside /workspace and '..' are refused."`
	Content   string `json:"content" jsonschema:"File content: UTF-8 text, or standard base64 when encoding is base64."`
	Encoding  string `json:"encoding,omitempty" jsonschema:"How content is encoded: utf-8 (default) or base64 (for binary files)."`
	SessionID string `json:"session_id,omitempty" jsonschema:"Use this existing nsbox session instead of this conversation's own one (leave empty normally)."`
}

// ReadFileInput is the input of read_file.
type ReadFileInput struct {
	Path      string `json:"path" jsonschema:"File path relative to /workspace. Images (PNG, JPEG, GIF, WebP) come back as images, text as text, other binary data as base64 text."`
	SessionID string `json:"session_id,omitempty" jsonschema:"Use this existing nsbox session instead of this conversation's own one (leave empty normally)."`
}

// ListFilesInput is the input of list_files.
type ListFilesInput struct {
	Path      string `json:"path,omitempty" jsonschema:"Directory (or file) relative to /workspace to list; empty lists the whole workspace."`
	SessionID string `json:"session_id,omitempty" jsonschema:"Use this existing nsbox session instead of this conversation's own one (leave empty normally)."`
}

// ForkSessionInput is the input of fork_session.
type ForkSessionInput struct {
	Count     int    `json:"count,omitempty" jsonschema:"How many branches to make (default 1)."`
	SessionID string `json:"session_id,omitempty" jsonschema:"Fork this session (e.g. a branch) instead of this conversation's own one (leave empty normally)."`
}

// ForkSessionOutput is fork_session's structured result: the branches'
// session ids, and per branch what its state left behind.
type ForkSessionOutput struct {
	Parent     string                           `json:"parent"`
	Branches   []string                         `json:"branches"`
	NotCarried map[string][]agentapi.NotCarried `json:"not_carried,omitempty"`
}

// MaxForkBranches bounds fork_session's count: a model's tree search
// rarely wants more at once, and each branch is a sandbox.
const MaxForkBranches = 8

// ResetSessionInput is the input of reset_session (none).
type ResetSessionInput struct{}

func schemaFor[In any](bound func(s *jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		// The input types are static; an error is a programming mistake
		// every test catches.
		panic(fmt.Sprintf("nsbox mcp: input schema: %v", err))
	}
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	if s.Required == nil {
		s.Required = []string{}
	}
	if bound != nil {
		bound(s)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func boundString(s *jsonschema.Schema, name string, minLen, maxLen int) {
	p := s.Properties[name]
	if minLen > 0 {
		p.MinLength = ptr(minLen)
	}
	p.MaxLength = ptr(maxLen)
}

// boundTimeout bounds timeout_s in whole seconds and says so (the
// description holds the default, which the schema has no keyword for).
func boundTimeout(s *jsonschema.Schema, f facts, what string) {
	p := s.Properties["timeout_s"]
	p.Minimum, p.Maximum = ptr(1.0), ptr(float64(f.maxTimeout))
	p.Description = f.timeoutText(what)
}

// boundSessionID bounds session_id, or drops it in per-call mode, which
// has no sessions to name.
func boundSessionID(s *jsonschema.Schema, f facts) {
	if f.perCall {
		delete(s.Properties, "session_id")
		return
	}
	p := s.Properties["session_id"]
	p.MaxLength = ptr(64)
	p.Pattern = "^[a-zA-Z0-9_-]*$"
}

// definitions returns the tools besides the run tools (runTools), in the
// order they are listed, described with f. Per-call mode drops the tools that need a persistent workspace.
func definitions(f facts) []*mcpsdk.Tool {
	main := f.mainTool()
	shell := "Run a shell command (bash -c) in the same sandbox and /workspace as " + main + ", e.g. to list files, inspect data with head/wc, " +
		"or run a script written with write_file. "
	if f.perCall {
		shell = "Run a shell command (bash -c) in a fresh sandbox like " + main + "'s (nothing persists between calls), e.g. to check the installed programs and packages. "
	}
	tools := []*mcpsdk.Tool{
		{
			Name:  ToolRunShell,
			Title: "Run shell command",
			Description: shell + "Returns stdout, stderr and the exit code; a non-zero exit code is reported as an error. " + f.limits() +
				"It has " + f.network() + " and no sudo; the root filesystem is read-only.",
			InputSchema: schemaFor[RunShellInput](func(s *jsonschema.Schema) {
				boundString(s, "command", 1, MaxCodeBytes)
				if !f.perCall {
					s.Properties["command"].Description += " It runs in the same sandbox as " + main + "."
				}
				boundTimeout(s, f, "the command is killed")
				boundSessionID(s, f)
			}),
			Annotations: &mcpsdk.ToolAnnotations{OpenWorldHint: ptr(false)},
		},
		{
			Name:  ToolWriteFile,
			Title: "Write file",
			Description: "Create or overwrite a file in the sandbox's /workspace (the working directory of " + main + " and run_shell). " +
				"Use encoding base64 for binary content. The file is then readable from code by its relative path.",
			InputSchema: schemaFor[WriteFileInput](func(s *jsonschema.Schema) {
				boundString(s, "path", 1, MaxPathBytes)
				boundString(s, "content", 0, MaxContentBytes)
				s.Properties["encoding"].Enum = []any{encodingUTF8, encodingBase64}
				s.Properties["encoding"].Default = []byte(`"utf-8"`)
				boundSessionID(s, f)
			}),
			Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
		},
		{
			Name:  ToolReadFile,
			Title: "Read file",
			Description: "Read a file from the sandbox's /workspace, e.g. a CSV or image the code produced. " +
				"Images come back as image content, UTF-8 text as text (long files are cut, with a note), other binary files as base64.",
			InputSchema: schemaFor[ReadFileInput](func(s *jsonschema.Schema) {
				boundString(s, "path", 1, MaxPathBytes)
				boundSessionID(s, f)
			}),
			Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
		},
		{
			Name:        ToolListFiles,
			Title:       "List files",
			Description: "List the files and directories in the sandbox's /workspace (or below path) with their sizes and types.",
			InputSchema: schemaFor[ListFilesInput](func(s *jsonschema.Schema) {
				boundString(s, "path", 0, MaxPathBytes)
				boundSessionID(s, f)
			}),
			Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
		},
		{
			Name:  ToolForkSession,
			Title: "Fork session",
			Description: "Branch " + main + "'s session into independent copies to try alternatives from the same state (best-of-N, tree search): " +
				"each branch starts with the session's variables, functions, imports and a copy of its /workspace files, in a sandbox of its own. " +
				"Returns the branches' session ids; pass one as session_id to " + main + ", run_shell or the file tools to work in that branch. " +
				"A change in one branch is not seen in another or in the original. Open files, sockets, threads and generators are not carried (the result lists them). " +
				"Branches end with this conversation.",
			InputSchema: schemaFor[ForkSessionInput](func(s *jsonschema.Schema) {
				p := s.Properties["count"]
				p.Minimum, p.Maximum = ptr(1.0), ptr(float64(MaxForkBranches))
				boundSessionID(s, f)
			}),
			Annotations: &mcpsdk.ToolAnnotations{OpenWorldHint: ptr(false)},
		},
		{
			Name:  ToolResetSession,
			Title: "Reset session",
			Description: "Discard this conversation's sandbox — every variable, import and file in /workspace — and start the next call in a fresh one. " +
				"Use it when the interpreter state is broken or you need a clean environment.",
			InputSchema: schemaFor[ResetSessionInput](nil),
			Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
		},
	}
	return slices.DeleteFunc(tools, func(t *mcpsdk.Tool) bool {
		switch t.Name {
		case ToolRunShell:
			return false
		case ToolForkSession:
			return f.perCall || !f.forks()
		}
		return f.perCall
	})
}
