// Command bankd serves the example bank on loopback until interrupted, to
// run the example's manifests by hand:
//
//	go run ./examples/bank/bankd -addr 127.0.0.1:8710 &
//	go run ./cmd/mandate run examples/bank/refund.hcl --var bank=http://127.0.0.1:8710 \
//	    --var agent=honest --input examples/bank/data/refund.txt
//
// Each request it receives, and each payment it books, is logged.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/mandatevm/mandate/examples/bank/bankapi"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8710", "where to listen (keep it on loopback)")
	flag.Parse()
	b := bankapi.New()
	h := b.Handler()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("bank of examples/bank on http://%s (Alice's account %s)", ln.Addr(), bankapi.Alice)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := len(b.Payments())
		h.ServeHTTP(w, r)
		log.Printf("%s %s", r.Method, r.URL.RequestURI())
		if ps := b.Payments(); len(ps) > n {
			p := ps[len(ps)-1]
			log.Printf("  booked %s: %s EUR to %s (%s)", p.ID, p.Amount, p.Recipient, p.Reference)
		}
	})}
	log.Fatal(srv.Serve(ln))
}
