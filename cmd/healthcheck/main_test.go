package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, `{"state":"leader"}`)
	}))
	t.Cleanup(srv.Close)
	var body strings.Builder
	if err := probe(srv.URL, &body); err != nil {
		t.Errorf("probe of a healthy server = %v, want nil", err)
	}
	if body.String() != `{"state":"leader"}` {
		t.Errorf("body: got %q, want the server's answer", body.String())
	}
	status = http.StatusServiceUnavailable
	if err := probe(srv.URL, io.Discard); err == nil {
		t.Error("probe of an unhealthy server = nil, want an error")
	}
	if err := probe("http://127.0.0.1:1/healthz", io.Discard); err == nil {
		t.Error("probe of a closed port = nil, want an error")
	}
}
