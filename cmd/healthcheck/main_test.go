package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	if err := probe(srv.URL); err != nil {
		t.Errorf("probe of a healthy server = %v, want nil", err)
	}
	status = http.StatusServiceUnavailable
	if err := probe(srv.URL); err == nil {
		t.Error("probe of an unhealthy server = nil, want an error")
	}
	if err := probe("http://127.0.0.1:1/healthz"); err == nil {
		t.Error("probe of a closed port = nil, want an error")
	}
}
