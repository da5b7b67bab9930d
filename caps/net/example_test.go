package net_test

import (
	"errors"
	"fmt"

	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

func Example() {
	k := net.New()
	gc := kindapi.GrantContext{LookupEnv: func(name string) (string, bool) {
		return "tok-123456789", name == "FLIGHTS_TOKEN" // the host's kindapi.Secret
	}}
	root, err := k.Grant(gc, []byte(`{
		"origin": "HTTPS://Flights.Example:443",
		"methods": ["GET"],
		"paths": ["/search"],
		"headers": [{"name": "Authorization", "env": "FLIGHTS_TOKEN", "prefix": "Bearer "}]
	}`))
	if err != nil {
		panic(err)
	}
	b, _ := root.MarshalJSON()
	fmt.Println(string(b))

	child, err := k.Narrow(root, []byte(`{"paths":["/search/economy"],"timeout":"5s","drop_headers":["Authorization"]}`))
	if err != nil {
		panic(err)
	}
	b, _ = child.MarshalJSON()
	fmt.Println(string(b))

	_, err = k.Narrow(child, []byte(`{"methods":["POST"]}`))
	fmt.Println(errors.Is(err, kindapi.ErrDenied), err)
	// Output:
	// {"origin":"https://flights.example","methods":["GET"],"paths":["/search"],"max_request_bytes":1048576,"max_response_bytes":10485760,"timeout":"30s","max_redirects":5,"allow_private":false,"headers":["Authorization"],"reserved_headers":["Authorization"],"clearance":[],"accepts_untrusted":true,"labels":[]}
	// {"origin":"https://flights.example","methods":["GET"],"paths":["/search/economy"],"max_request_bytes":1048576,"max_response_bytes":10485760,"timeout":"5s","max_redirects":5,"allow_private":false,"headers":[],"reserved_headers":["Authorization"],"clearance":[],"accepts_untrusted":true,"labels":[]}
	// true net: narrowing would widen the capability: methods [POST] not in [GET]
}
