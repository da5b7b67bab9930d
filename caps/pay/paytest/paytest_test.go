package paytest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

func post(t *testing.T, p *Provider, body string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Post(p.URL+"/charges", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestProvider(t *testing.T) {
	p := NewProvider()
	defer p.Close()
	p.RequireInstrument("tok")
	ok := `{"amount_minor":100,"currency":"USD","payee":"a","instrument":"tok","idempotency_key":"k1"}`
	if st, m := post(t, p, ok); st != 201 || m["id"] != "ch_1" || m["status"] != "succeeded" {
		t.Fatalf("%d %v", st, m)
	}
	if st, m := post(t, p, ok); st != 200 || m["id"] != "ch_1" {
		t.Fatalf("replay: %d %v", st, m)
	}
	if st, _ := post(t, p, `{"amount_minor":200,"currency":"USD","payee":"a","instrument":"tok","idempotency_key":"k1"}`); st != 409 {
		t.Fatalf("conflicting replay: %d", st)
	}
	if st, _ := post(t, p, `{"amount_minor":100,"currency":"USD","payee":"a","instrument":"bad","idempotency_key":"k2"}`); st != 402 {
		t.Fatalf("bad instrument: %d", st)
	}
	if st, _ := post(t, p, `{"amount_minor":0,"currency":"USD","payee":"a","instrument":"tok","idempotency_key":"k3"}`); st != 400 {
		t.Fatalf("zero amount: %d", st)
	}
	p.FailNext(1)
	if st, _ := post(t, p, `{"amount_minor":100,"currency":"USD","payee":"a","instrument":"tok","idempotency_key":"k4"}`); st != 500 {
		t.Fatalf("FailNext: %d", st)
	}
	p.Hang(true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/charges", bytes.NewBufferString(ok))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("Hang: the request completed")
	}
	p.Hang(false)
	if n := len(p.Charges()); n != 1 || p.Total() != 100 || p.Replays() != 1 || p.Requests() != 7 {
		t.Errorf("charges %d total %d replays %d requests %d", n, p.Total(), p.Replays(), p.Requests())
	}
}
