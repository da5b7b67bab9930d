package abi

import (
	"encoding/json"
	"fmt"
)

// The operations of an mcp capability (caps/mcp), a client of one upstream
// MCP server: call calls one of its tools, tools lists the pinned
// definitions of the tools the capability allows, resources and read list
// and read its resources, prompts and prompt list and get its prompts.
const (
	MCPCallOp      = "call"
	MCPToolsOp     = "tools"
	MCPResourcesOp = "resources"
	MCPReadOp      = "read"
	MCPPromptsOp   = "prompts"
	MCPPromptOp    = "prompt"
)

// Bounds on an mcp request (beyond MaxArgLen for the whole document).
const (
	MaxMCPNameLen   = 256
	MaxMCPURILen    = 2048
	MaxMCPPromptArg = 64
)

// MCPCallRequest is the argument document of call: the tool and its
// arguments (a JSON object). A string value anywhere in Arguments may hold
// SplicePlaceholder(i) for Splice[i] (the blob's bytes, UTF-8 text, put
// there by the kernel), or be exactly PartPlaceholder(i) for
// SpliceParts[i] (the part's JSON value replaces the whole string), so a
// task can pass the server data it never read.
type MCPCallRequest struct {
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	Splice      []Handle        `json:"splice,omitempty"`
	SpliceParts []SplicePart    `json:"splice_parts,omitempty"`
}

// MCPCallResult is the result blob of call: the server's CallToolResult.
// IsError is a tool's own failure, which the task reads; it is not an
// errno.
type MCPCallResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError"`
}

// MCPReadRequest is the argument document of read.
type MCPReadRequest struct {
	URI string `json:"uri"`
}

// MCPPromptRequest is the argument document of prompt.
type MCPPromptRequest struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
}

// DecodeMCPCallRequest decodes and bounds-checks a call argument.
func DecodeMCPCallRequest(b []byte) (MCPCallRequest, error) {
	var r MCPCallRequest
	if err := DecodeJSON(b, &r); err != nil {
		return MCPCallRequest{}, err
	}
	switch {
	case r.Tool == "":
		return MCPCallRequest{}, fmt.Errorf("%w: no tool", ErrMalformed)
	case len(r.Tool) > MaxMCPNameLen:
		return MCPCallRequest{}, fmt.Errorf("%w: a tool name of %d bytes (max %d)", ErrTooLarge, len(r.Tool), MaxMCPNameLen)
	case len(r.Splice) > MaxSplice:
		return MCPCallRequest{}, fmt.Errorf("%w: %d spliced blobs (max %d)", ErrTooLarge, len(r.Splice), MaxSplice)
	case len(r.SpliceParts) > MaxSplice:
		return MCPCallRequest{}, fmt.Errorf("%w: %d spliced parts (max %d)", ErrTooLarge, len(r.SpliceParts), MaxSplice)
	}
	return r, nil
}

// DecodeMCPReadRequest decodes and bounds-checks a read argument.
func DecodeMCPReadRequest(b []byte) (MCPReadRequest, error) {
	var r MCPReadRequest
	if err := DecodeJSON(b, &r); err != nil {
		return MCPReadRequest{}, err
	}
	switch {
	case r.URI == "":
		return MCPReadRequest{}, fmt.Errorf("%w: no uri", ErrMalformed)
	case len(r.URI) > MaxMCPURILen:
		return MCPReadRequest{}, fmt.Errorf("%w: a uri of %d bytes (max %d)", ErrTooLarge, len(r.URI), MaxMCPURILen)
	}
	return r, nil
}

// DecodeMCPPromptRequest decodes and bounds-checks a prompt argument.
func DecodeMCPPromptRequest(b []byte) (MCPPromptRequest, error) {
	var r MCPPromptRequest
	if err := DecodeJSON(b, &r); err != nil {
		return MCPPromptRequest{}, err
	}
	switch {
	case r.Name == "":
		return MCPPromptRequest{}, fmt.Errorf("%w: no name", ErrMalformed)
	case len(r.Name) > MaxMCPNameLen:
		return MCPPromptRequest{}, fmt.Errorf("%w: a prompt name of %d bytes (max %d)", ErrTooLarge, len(r.Name), MaxMCPNameLen)
	case len(r.Arguments) > MaxMCPPromptArg:
		return MCPPromptRequest{}, fmt.Errorf("%w: %d prompt arguments (max %d)", ErrTooLarge, len(r.Arguments), MaxMCPPromptArg)
	}
	return r, nil
}
