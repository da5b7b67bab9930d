// Package cli is the mandate command: build, run, graph, version and help.
// cmd/mandate is a one-line main around Main; examples call Main in-process
// so they show exactly what the command does.
//
//	code := cli.Main([]string{"run", "task.hcl", "--var", "origin=http://127.0.0.1:8080"}, os.Stdin, os.Stdout, os.Stderr)
package cli
