package mcp

import (
	"encoding/json"
	"fmt"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
)

// Tool definition formats of Definitions.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatMCP       = "mcp"
)

// Formats lists the formats Definitions accepts.
func Formats() []string { return []string{FormatOpenAI, FormatAnthropic, FormatMCP} }

// OpenAITool is a tool of the OpenAI Chat Completions "tools" parameter.
type OpenAITool struct {
	Type     string         `json:"type"` // "function"
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAITool.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// AnthropicTool is a tool of the Anthropic Messages API "tools" parameter.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// MCPTool is a tool as MCP's tools/list lists it.
type MCPTool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Definitions returns the tools `nsbox mcp` serves (per-connection mode
// on a rootfs that runs every language of langs, described without asking
// a daemon) in format, ready to marshal:
// []OpenAITool, []AnthropicTool or []MCPTool. The input schemas are the
// very ones the MCP server validates calls against.
func Definitions(format string, langs []agentapi.LanguageInfo) (any, error) {
	f := newFacts(Config{Languages: langs})
	f.langs = langs
	var tools []*mcpsdk.Tool
	for _, t := range runTools(f) {
		tools = append(tools, t.definition(f))
	}
	tools = append(tools, definitions(f)...)
	switch format {
	case FormatOpenAI:
		out := make([]OpenAITool, 0, len(tools))
		for _, t := range tools {
			s, err := schemaJSON(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("tool %s: %w", t.Name, err)
			}
			out = append(out, OpenAITool{Type: "function", Function: OpenAIFunction{Name: t.Name, Description: t.Description, Parameters: s}})
		}
		return out, nil
	case FormatAnthropic:
		out := make([]AnthropicTool, 0, len(tools))
		for _, t := range tools {
			s, err := schemaJSON(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("tool %s: %w", t.Name, err)
			}
			out = append(out, AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: s})
		}
		return out, nil
	case FormatMCP:
		out := make([]MCPTool, 0, len(tools))
		for _, t := range tools {
			s, err := schemaJSON(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("tool %s: %w", t.Name, err)
			}
			out = append(out, MCPTool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: s})
		}
		return out, nil
	}
	return nil, fmt.Errorf("format %q: %w", format, ErrUnknownFormat)
}

// schemaJSON marshals an input schema with "properties" and "required"
// always present (some function-calling validators insist on both).
func schemaJSON(schema any) (json.RawMessage, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if _, ok := m["properties"]; !ok {
		m["properties"] = map[string]any{}
	}
	if _, ok := m["required"]; !ok {
		m["required"] = []string{}
	}
	return json.Marshal(m)
}
