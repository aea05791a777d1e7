package mcp

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"
)

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkSchema checks what every function-calling API asks of an input
// schema: an object with properties and required, every required name a
// property.
func checkSchema(t *testing.T, name string, s map[string]any) {
	t.Helper()
	if s["type"] != "object" {
		t.Errorf("%s: schema type %v, want object", name, s["type"])
	}
	props, ok := s["properties"].(map[string]any)
	if !ok {
		t.Fatalf("%s: schema has no properties object: %v", name, s)
	}
	req, ok := s["required"].([]any)
	if !ok {
		t.Fatalf("%s: schema has no required array: %v", name, s)
	}
	for _, r := range req {
		if _, ok := props[r.(string)]; !ok {
			t.Errorf("%s: required %q is not a property", name, r)
		}
	}
	for p, v := range props {
		ps, ok := v.(map[string]any)
		if !ok || ps["type"] == nil || ps["description"] == nil {
			t.Errorf("%s.%s: property without type or description: %v", name, p, v)
		}
	}
}

func TestDefinitionsShape(t *testing.T) {
	want := []string{ToolRunPython, ToolRunJavaScript, ToolRunShell, ToolWriteFile, ToolReadFile, ToolListFiles, ToolForkSession, ToolResetSession}
	tests := []struct {
		format string
		// tool extracts name, description and schema of one element.
		tool func(t *testing.T, m map[string]any) (name, desc string, schema map[string]any)
	}{
		{FormatOpenAI, func(t *testing.T, m map[string]any) (string, string, map[string]any) {
			if m["type"] != "function" {
				t.Errorf("type %v, want function", m["type"])
			}
			f, _ := m["function"].(map[string]any)
			s, _ := f["parameters"].(map[string]any)
			n, _ := f["name"].(string)
			d, _ := f["description"].(string)
			return n, d, s
		}},
		{FormatAnthropic, func(t *testing.T, m map[string]any) (string, string, map[string]any) {
			s, _ := m["input_schema"].(map[string]any)
			n, _ := m["name"].(string)
			d, _ := m["description"].(string)
			return n, d, s
		}},
		{FormatMCP, func(t *testing.T, m map[string]any) (string, string, map[string]any) {
			s, _ := m["inputSchema"].(map[string]any)
			n, _ := m["name"].(string)
			d, _ := m["description"].(string)
			return n, d, s
		}},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			defs, err := Definitions(tc.format, builtinLangs())
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(defs)
			if err != nil {
				t.Fatal(err)
			}
			var list []map[string]any
			if err := json.Unmarshal(b, &list); err != nil {
				t.Fatalf("not a JSON array of objects: %v\n%s", err, b)
			}
			var names []string
			for _, m := range list {
				name, desc, schema := tc.tool(t, m)
				if !toolName.MatchString(name) {
					t.Errorf("name %q does not match %s", name, toolName)
				}
				if len(desc) < 40 {
					t.Errorf("%s: description too short: %q", name, desc)
				}
				if schema == nil {
					t.Fatalf("%s: no schema in %v", name, m)
				}
				checkSchema(t, name, schema)
				names = append(names, name)
			}
			if len(names) != len(want) {
				t.Fatalf("tools %v, want %v", names, want)
			}
			for i := range want {
				if names[i] != want[i] {
					t.Fatalf("tools %v, want %v", names, want)
				}
			}
		})
	}
}

func TestDefinitionsBounds(t *testing.T) {
	defs, err := Definitions(FormatMCP, builtinLangs())
	if err != nil {
		t.Fatal(err)
	}
	var code, timeout, enc, ts map[string]any
	for _, d := range defs.([]MCPTool) {
		var s struct {
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		}
		if err := json.Unmarshal(d.InputSchema, &s); err != nil {
			t.Fatal(err)
		}
		switch d.Name {
		case ToolRunPython:
			code, timeout = s.Properties["code"], s.Properties["timeout_s"]
			if len(s.Required) != 1 || s.Required[0] != "code" {
				t.Errorf("run_python required %v", s.Required)
			}
		case ToolWriteFile:
			enc = s.Properties["encoding"]
		case ToolRunJavaScript:
			ts = s.Properties["typescript"]
			if len(s.Required) != 1 || s.Required[0] != "code" {
				t.Errorf("run_javascript required %v", s.Required)
			}
		}
	}
	if code["minLength"] != 1.0 || code["maxLength"] != float64(MaxCodeBytes) {
		t.Errorf("code bounds %v", code)
	}
	if timeout["type"] != "integer" || timeout["minimum"] != 1.0 || timeout["maximum"] != float64(MaxTimeoutS) {
		t.Errorf("timeout_s bounds %v", timeout)
	}
	if ts["type"] != "boolean" {
		t.Errorf("run_javascript typescript %v", ts)
	}
	if e, _ := enc["enum"].([]any); len(e) != 2 || e[0] != "utf-8" || e[1] != "base64" {
		t.Errorf("encoding enum %v", enc["enum"])
	}
}

func TestDefinitionsUnknownFormat(t *testing.T) {
	if _, err := Definitions("gemini", nil); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("err %v, want ErrUnknownFormat", err)
	}
}
