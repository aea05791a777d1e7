package main

import (
	"encoding/json"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi/mcp"
	"github.com/nsbox/nsbox/cmd/nsbox/internal/cmdline"
	"github.com/nsbox/nsbox/daemon/lang"
)

func toolsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tools",
		Usage: "print the sandbox tools as function-calling definitions (JSON) for OpenAI, Anthropic or MCP",
		Description: "The definitions are the ones `nsbox mcp` serves (same names, descriptions and input schemas),\n" +
			"ready for the \"tools\" parameter of the OpenAI Chat Completions or Anthropic Messages API.",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: mcp.FormatOpenAI, Usage: "`FORMAT`: one of " + strings.Join(mcp.Formats(), ", ")},
		},
		Action: func(c *cli.Context) error {
			defs, err := mcp.Definitions(c.String("format"), lang.BuiltinInfo())
			if err != nil {
				return cmdline.UsageError(c, "--format: %v", err)
			}
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(defs)
		},
	}
}
