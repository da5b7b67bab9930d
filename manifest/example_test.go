package manifest_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/mandatevm/mandate/manifest"
)

func ExampleLoad() {
	dir, err := os.MkdirTemp("", "manifest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "guest.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	path := filepath.Join(dir, "quickstart.hcl")
	os.WriteFile(path, []byte(`task "quickstart" {
  module    = "guest.wasm"
  principal = "alice"
  limits {
    memory  = "64MiB"
    timeout = "30s"
  }
  cap "net" "flights" {
    origin  = var.origin
    methods = ["GET"]
    paths   = ["/search"]
    audit   = true
  }
}
`), 0o644)

	m, err := manifest.Load(path, map[string]string{"origin": "https://flights.example"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Name, m.Principal, filepath.Base(m.ModulePath))
	fmt.Println(m.Limits().Memory, m.Limits().Timeout)
	for _, c := range m.Caps {
		fmt.Println(c.Kind, c.Name, c.Audit, string(c.Spec))
	}

	// An unset variable is reported at its position.
	_, err = manifest.Load(path, nil)
	fmt.Println(err.Error()[len(dir)+1:])
	// Output:
	// quickstart alice guest.wasm
	// 67108864 30s
	// net flights true {"methods":["GET"],"origin":"https://flights.example","paths":["/search"]}
	// quickstart.hcl:9,15: variable "origin" is not set: pass --var origin=VALUE
}
