package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
)

// The run tools come from the daemon's language registry (GET /v1/info
// language_info), never from a list here: each language with sessions
// and no transform is a tool run_NAME (run_python, run_javascript), and
// each language of the same runner with a transform is a boolean switch
// of that tool named after it (run_javascript's typescript). Adding a
// runner language to the daemon adds its tool.

// RunTool is the name of the tool that runs language.
func RunTool(language string) string { return "run_" + language }

// runTool is one run tool: a language and its variants.
type runTool struct {
	lang agentapi.LanguageInfo
	// main: the daemon's default language, whose session run_shell, the
	// file tools and fork_session share.
	main bool
	// variants are the languages of its runner with a transform that the
	// rootfs runs; missing those it does not.
	variants, missing []agentapi.LanguageInfo
}

func (t runTool) name() string { return RunTool(t.lang.Name) }

// variant returns the variant named name.
func (t runTool) variant(name string) (agentapi.LanguageInfo, bool) {
	i := slices.IndexFunc(t.variants, func(v agentapi.LanguageInfo) bool { return v.Name == name })
	if i < 0 {
		return agentapi.LanguageInfo{}, false
	}
	return t.variants[i], true
}

// runTools lists the run tools of f's languages, in the daemon's order.
func runTools(f facts) []runTool {
	var out []runTool
	for _, l := range f.langs {
		if !l.Sessions || l.Transform != "" {
			continue
		}
		t := runTool{lang: l, main: l.Default}
		for _, v := range f.all {
			if v.Runner != l.Runner || v.Transform == "" {
				continue
			}
			if slices.ContainsFunc(f.langs, func(o agentapi.LanguageInfo) bool { return o.Name == v.Name }) {
				t.variants = append(t.variants, v)
			} else {
				t.missing = append(t.missing, v)
			}
		}
		out = append(out, t)
	}
	return out
}

// RunCodeInput is the input of a run tool: the code, and which variant of
// the tool's language it is in (a boolean argument named after it, such
// as typescript).
type RunCodeInput struct {
	Code      string `json:"code" jsonschema:"The code to run."`
	SessionID string `json:"session_id,omitempty" jsonschema:"Run in this existing nsbox session instead of this conversation's own one (leave empty normally)."`
	TimeoutS  int    `json:"timeout_s,omitempty" jsonschema:"Whole seconds before the cell is interrupted."`
	// Variants are the boolean arguments set to true.
	Variants []string `json:"-"`
}

// UnmarshalJSON reads the fields and the variant switches set.
func (in *RunCodeInput) UnmarshalJSON(b []byte) error {
	type plain RunCodeInput
	if err := json.Unmarshal(b, (*plain)(in)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for k, v := range all {
		var on bool
		if json.Unmarshal(v, &on) == nil && on {
			in.Variants = append(in.Variants, k)
		}
	}
	slices.Sort(in.Variants)
	return nil
}

// language is the language a call of t with in runs.
func (t runTool) language(in RunCodeInput) (string, error) {
	switch len(in.Variants) {
	case 0:
		return t.lang.Name, nil
	case 1:
		if v, ok := t.variant(in.Variants[0]); ok {
			return v.Name, nil
		}
	}
	return "", fmt.Errorf("%s: set at most one of %s", t.name(), strings.Join(in.Variants, ", "))
}

// definition is t's tool, described with f.
func (t runTool) definition(f facts) *mcpsdk.Tool {
	l, name := t.lang, t.name()
	var state string
	switch {
	case f.perCall:
		state = "Every call runs in a fresh sandbox: nothing persists between calls, so each call must be self-contained. "
	case t.main:
		state = "State persists across calls like a notebook's: define a variable or import a module in one call and use it in the next. "
	default:
		main := f.mainTool()
		state = "State persists across " + name + " calls: variables, functions and loaded modules stay defined. " +
			"This is a " + l.Title + " session of its own, separate from " + main + "'s sandbox: it shares neither variables nor /workspace files " +
			"with " + main + ", " + ToolRunShell + " and the file tools (write_file, read_file and list_files reach " + main + "'s /workspace); reset_session discards both. "
	}
	var variants string
	for _, v := range t.variants {
		if f.perCall {
			variants += "Pass " + v.Name + ": true for " + v.Description + " "
			continue
		}
		variants += "The first " + name + " call fixes the session's language: pass " + v.Name + ": true on it if you will write " + v.Title +
			" (a " + v.Title + " session runs plain " + l.Title + " too). " + v.Description + " "
	}
	for _, v := range t.missing {
		variants += "This rootfs cannot run " + v.Title + ": write plain " + l.Title + ". "
	}
	var env string
	switch {
	case l.Zygote:
		env = f.environment()
	case f.rootfs == "":
		env = "It needs a rootfs that runs " + l.Title + " (GET /v1/info lists each rootfs's languages). "
	default:
		env = "The rootfs (" + f.rootfs + ") runs " + l.Title + ". "
	}
	files := ""
	if t.main {
		files = "Files live in /workspace (the working directory); use write_file to provide data and read_file to fetch results. "
		if f.perCall {
			files = "The working directory is /workspace. "
		}
		files += f.mounted()
	}
	return &mcpsdk.Tool{
		Name:  name,
		Title: "Run " + l.Title,
		Description: "Execute " + l.Title + " code in an isolated Linux sandbox (" + f.network() + ", no access to the host's files) and return its stdout and stderr. " +
			l.Description + " " + state + variants + env + files + f.limits() +
			"If the result has isError, read the error, fix the code and call again.",
		InputSchema: schemaFor[RunCodeInput](func(s *jsonschema.Schema) {
			boundString(s, "code", 1, MaxCodeBytes)
			s.Properties["code"].Description = "The " + l.Title + " code to run."
			if !f.perCall {
				s.Properties["code"].Description += " Variables, imports and files persist between " + name + " calls in the same session."
			}
			for _, v := range t.variants {
				s.Properties[v.Name] = &jsonschema.Schema{Type: "boolean", Description: "Set for " + v.Description}
			}
			boundTimeout(s, f, "the cell is interrupted")
			boundSessionID(s, f)
		}),
		Annotations: &mcpsdk.ToolAnnotations{OpenWorldHint: ptr(false)},
	}
}

// key is the connection's session slot of t: "" for the main language's.
func (t runTool) key() string {
	if t.main {
		return ""
	}
	return t.lang.Name
}

// handler serves calls of t.
func (s *Server) handler(t runTool) mcpsdk.ToolHandlerFor[RunCodeInput, any] {
	return func(ctx context.Context, req *mcpsdk.CallToolRequest, in RunCodeInput) (*mcpsdk.CallToolResult, any, error) {
		lang, err := t.language(in)
		if err != nil {
			return nil, nil, err
		}
		timeoutMs := int64(in.TimeoutS) * 1000
		if s.perCall() {
			res, err := s.client.Run(ctx, s.runRequest(lang, in.Code, timeoutMs))
			if err != nil {
				return nil, nil, err
			}
			return cellResult(res, nil, s.facts), res, nil
		}
		if in.SessionID != "" && !t.main {
			sess, err := s.client.Session(ctx, in.SessionID)
			if err != nil {
				return nil, nil, err
			}
			if err := t.fits(sess.Language, lang); err != nil {
				return nil, nil, fmt.Errorf("session %s: %w", in.SessionID, err)
			}
		}
		// The main language's own session is the daemon's default one.
		if t.main && lang == t.lang.Name {
			lang = ""
		}
		fits := func(have string) error {
			if lang == have || lang == t.key() || lang == "" {
				return nil
			}
			v, _ := t.variant(lang)
			return fmt.Errorf("%w: this conversation's %s session was started by a call without %s; send plain %s, "+
				"or call reset_session (which also discards %s's state) and start again with %s: true",
				ErrSessionLanguage, t.name(), v.Name, t.lang.Title, s.facts.mainTool(), v.Name)
		}
		res, notes, err := s.exec(ctx, req.Session, t.key(), lang, fits, in.SessionID, in.Code, timeoutMs)
		if err != nil {
			return nil, nil, err
		}
		return cellResult(res, notes, s.facts), res, nil
	}
}

// fits checks that a session of language have (named by the model) runs
// code of lang: a session of a variant runs the plain language too.
func (t runTool) fits(have, lang string) error {
	_, variant := t.variant(have)
	switch {
	case have == lang, variant && lang == t.lang.Name:
		return nil
	case have == t.lang.Name:
		return fmt.Errorf("%w: it is a %s session; send plain %s (%s: false) to it", ErrSessionLanguage, t.lang.Title, t.lang.Title, lang)
	}
	want := []string{t.lang.Name}
	for _, v := range t.variants {
		want = append(want, v.Name)
	}
	return fmt.Errorf("%w: it is a %s session; %s needs a %s one", ErrSessionLanguage, have, t.name(), strings.Join(want, " or "))
}
