//go:build postgres

package main

// PostgreSQL data stores (internal/optional).
import _ "github.com/mandatevm/mandate/caps/data/pgstore"
