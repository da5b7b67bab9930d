// Command engine-badimport imports a function from a module no engine
// registers; Compile must refuse it.
package main

//go:wasmimport evil steal_secrets
func stealSecrets() uint32

func main() {
	stealSecrets()
}
