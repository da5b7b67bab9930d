// Command mcp-conformance is the MCP conformance suite's reference test
// tools as one guest (internal/cli/mcp_conformance_test.go). It is a
// reactor: a policy's tool block selects the behaviour with its entry
// (entry = "simple_text" for test_simple_text, and so on), since a call's
// input is only its arguments, and most of the suite's tools take none.
//
// Each entry does what @modelcontextprotocol/conformance expects of the
// tool, as far as a task can: what it returns is its result, which mandate
// mcp serve shows as one text content item (and as structured content
// when it is a JSON object). The content entries (image, audio, embedded
// resource, mixed) return the reference server's content array as JSON,
// so the suite's verdict on them is about how the server maps a result,
// not about what the tool returned.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"time"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

// This guest is a reactor:
//
//mandate:reactor

func main() {}

// simple_text is test_simple_text.
//
//go:wasmexport simple_text
func simpleText() { mandate.SetResult([]byte("This is a simple text response for testing.")) }

// error_handling is test_error_handling: the task fails, which the server
// reports as a tool error (isError).
//
//go:wasmexport error_handling
func errorHandling() {
	fmt.Fprintln(os.Stderr, "This tool intentionally returns an error for testing")
	os.Exit(1)
}

// progress is test_tool_with_progress. The server, not the tool, sends
// progress while a call runs (every second, when the client passed a
// progress token): the tool runs long enough for three.
//
//go:wasmexport progress
func progress() {
	time.Sleep(3300 * time.Millisecond)
	mandate.SetResult([]byte("Progress test completed"))
}

// logging is test_tool_with_logging: three lines on stderr, 50 ms apart
// (the server logs a tool's output; it sends no MCP log notifications).
//
//go:wasmexport logging
func logging() {
	for i, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if i > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Fprintln(os.Stderr, m)
	}
	mandate.SetResult([]byte("Logging test completed"))
}

// json_schema is json_schema_2020_12_tool: it echoes its arguments (the
// scenario only lists the tool's schema).
//
//go:wasmexport json_schema
func jsonSchema() {
	in, err := mandate.InputBytes()
	if err != nil {
		fail(err)
	}
	mandate.SetResult(in)
}

// redPixel is a 1x1 red PNG.
const redPixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

func image() map[string]any {
	return map[string]any{"type": "image", "data": redPixel, "mimeType": "image/png"}
}

// silence is a WAV file of no samples (8 kHz, mono, 8-bit).
func silence() string {
	b := []byte("RIFF\x00\x00\x00\x00WAVEfmt ")
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1)    // PCM
	b = binary.LittleEndian.AppendUint16(b, 1)    // mono
	b = binary.LittleEndian.AppendUint32(b, 8000) // sample rate
	b = binary.LittleEndian.AppendUint32(b, 8000) // byte rate
	b = binary.LittleEndian.AppendUint16(b, 1)    // block align
	b = binary.LittleEndian.AppendUint16(b, 8)    // bits per sample
	b = append(b, "data\x00\x00\x00\x00"...)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
	return base64.StdEncoding.EncodeToString(b)
}

func content(items ...map[string]any) {
	b, err := json.Marshal(map[string]any{"content": items})
	if err != nil {
		fail(err)
	}
	mandate.SetResult(b)
}

// image_content is test_image_content.
//
//go:wasmexport image_content
func imageContent() { content(image()) }

// audio_content is test_audio_content.
//
//go:wasmexport audio_content
func audioContent() {
	content(map[string]any{"type": "audio", "data": silence(), "mimeType": "audio/wav"})
}

// embedded_resource is test_embedded_resource.
//
//go:wasmexport embedded_resource
func embeddedResource() {
	content(map[string]any{"type": "resource", "resource": map[string]any{
		"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}})
}

// multiple_content_types is test_multiple_content_types.
//
//go:wasmexport multiple_content_types
func multipleContentTypes() {
	content(map[string]any{"type": "text", "text": "Multiple content types test:"}, image(),
		map[string]any{"type": "resource", "resource": map[string]any{
			"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": `{"test":"data","value":123}`}})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mcp-conformance:", err)
	os.Exit(1)
}
