// Command gen writes internal/sdkembed/sdk.zip from guest-sdk/ (run by go
// generate ./internal/sdkembed, in that folder).
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/mandatevm/mandate/internal/sdkembed"
)

func main() {
	var buf bytes.Buffer
	if err := sdkembed.WriteArchive(&buf, "../../guest-sdk"); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile("sdk.zip", buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
