package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/data/pgstore/pgurl"
	"github.com/mandatevm/mandate/host"
)

const dataHelp = `Usage: mandate data import FILE.json|FILE.csv --collection NAME [--relation FIELD=RELATION]... [--store PATH|URL]
       mandate data export --collection NAME [--store PATH|URL]

Loads records into the data store that "data" capabilities read: a SQLite
file, by default STATE_DIR/data.db, or a PostgreSQL database that a fleet
of nodes shares (a postgres:// URL). The whole file is imported
in one transaction: if any record is bad, nothing is imported and the
error names the record (JSON: its index from 0; CSV: its line). A record
whose id is already in the collection is replaced.

JSON: an array of records:

	[{"id": "b1", "owner": "alice",
	  "fields": {"plan": "gold", "passport": "X123"},
	  "labels": {"passport": ["pii:$owner"]}}]

CSV: a header row with columns id, owner and one per field; values are
strings and an empty cell leaves the field out. A header "name[tag,...]"
labels the field (quote the cell if it has a comma):

	id,owner,plan,passport[pii:$owner]
	b1,alice,gold,X123

In labels, $owner stands for the record's owner.

"mandate data export" prints a collection's records as JSON in the import
format (labels with the owner substituted), sorted by id.

Flags:

	--collection NAME          the collection to import into (required)
	--relation FIELD=RELATION  derive principal relations from a field: each
	                           record whose FIELD is a principal id S (or a
	                           list of them) records "S RELATION owner", e.g.
	                           --relation manager=manager_of for rules like
	                           records = { relation = "manager_of" }
	--store PATH|URL           the store: a SQLite file, or a postgres:// URL
	                           (its password best in PGPASSWORD or PGPASSFILE;
	                           never printed); default $MANDATE_DATA_STORE,
	                           else STATE_DIR/data.db
	--state-dir DIR            the state directory (default $MANDATE_STATE_DIR,
	                           else $XDG_STATE_HOME/mandate, else
	                           ~/.local/state/mandate)

Examples:

	mandate data import benefits.json --collection benefits
	mandate data import people.csv --collection people --relation manager=manager_of
	mandate data export --collection benefits
`

// relationFlag collects --relation FIELD=RELATION.
type relationFlag map[string]string

func (r relationFlag) String() string { return "" }

func (r relationFlag) Set(s string) error {
	f, rel, ok := strings.Cut(s, "=")
	if !ok || f == "" || rel == "" {
		return fmt.Errorf("want FIELD=RELATION, got %q", s)
	}
	if _, dup := r[f]; dup {
		return fmt.Errorf("field %q given twice", f)
	}
	r[f] = rel
	return nil
}

func runData(e *env, args []string) int {
	c := lookupCommand("data")
	if len(args) == 0 {
		return e.usageError(c, "missing the subcommand (import)")
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(e.stdout, dataHelp)
		return exitOK
	case "import", "export":
	default:
		return e.usageError(c, "unknown subcommand %q (subcommands: import, export)", args[0])
	}
	sub := args[0]
	fs := flagSet("data")
	collection := fs.String("collection", "", "")
	store := fs.String("store", "", "")
	stateFlag := stateDirFlag(fs)
	rels := relationFlag{}
	fs.Var(rels, "relation", "")
	pos, code, ok := e.parse(c, fs, args[1:])
	if !ok {
		return code
	}
	if *collection == "" {
		return e.usageError(c, "missing --collection")
	}
	path := *store
	if path == "" {
		path = os.Getenv(host.DataStoreEnv)
	}
	if path == "" {
		state, err := e.stateDir(*stateFlag)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		path = host.DataStorePath(state)
	}
	if sub == "export" {
		if len(rels) > 0 {
			return e.usageError(c, "--relation is for import")
		}
		if len(pos) > 0 {
			return e.usageError(c, "unexpected argument %q", pos[0])
		}
		return e.dataExport(path, *collection)
	}
	file, code, ok := e.oneArg(c, pos, "the file to import")
	if !ok {
		return code
	}
	if !data.Importable(file) {
		return e.usageError(c, "%s: want a .json or .csv file", file)
	}
	recs, err := data.ReadFile(file)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := host.OpenDataStore(ctx, path)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer st.Close()
	n, err := st.Import(ctx, *collection, recs, data.ImportOptions{Relations: rels})
	if err != nil {
		e.errorf("%s: %v (nothing imported)", file, err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "imported %d records into %s (%s)\n", n, *collection, st.Location())
	return exitOK
}

// dataExport prints collection's records as a JSON array.
func (e *env) dataExport(path, collection string) int {
	if !pgurl.IsURL(path) {
		if _, err := os.Stat(path); err != nil {
			e.errorf("data store: %v", err)
			return exitUsage
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := host.OpenDataStore(ctx, path)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	defer st.Close()
	recs, err := st.Records(ctx, collection)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if recs == nil {
		recs = []data.Record{}
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "%s\n", b)
	return exitOK
}
