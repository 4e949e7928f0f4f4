package pprof

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestHandle checks each handler's answer: what it serves, and a clear
// 4xx for a request it cannot serve.
func TestHandle(t *testing.T) {
	mux := http.NewServeMux()
	Handle(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tests := []struct {
		path        string
		code        int
		contentType string
		body        string // a substring of the body
	}{
		{"/debug/pprof/", http.StatusOK, "text/plain; charset=utf-8", "/debug/pprof/heap"},
		{"/debug/pprof/heap", http.StatusOK, "application/octet-stream", ""},
		{"/debug/pprof/heap?debug=1", http.StatusOK, "text/plain; charset=utf-8", "heap profile"},
		{"/debug/pprof/goroutine?debug=2", http.StatusOK, "text/plain; charset=utf-8", "goroutine"},
		{"/debug/pprof/profile?seconds=0.05", http.StatusOK, "application/octet-stream", ""},
		{"/debug/pprof/trace?seconds=0.05", http.StatusOK, "application/octet-stream", ""},
		{"/debug/pprof/nothing", http.StatusNotFound, "", "no profile \"nothing\""},
		{"/debug/pprof/heap?debug=x", http.StatusBadRequest, "", "not a whole number"},
		{"/debug/pprof/profile?seconds=0", http.StatusBadRequest, "", "between 0 and 3600"},
		{"/debug/pprof/trace?seconds=forever", http.StatusBadRequest, "", "between 0 and 3600"},
	}
	for _, tt := range tests {
		resp, err := srv.Client().Get(srv.URL + tt.path)
		if err != nil {
			t.Fatalf("GET %s: %v", tt.path, err)
		}
		var b bytes.Buffer
		_, err = b.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: reading the body: %v", tt.path, err)
		}
		if resp.StatusCode != tt.code {
			t.Errorf("GET %s: %d, want %d (%.200q)", tt.path, resp.StatusCode, tt.code, b.String())
		}
		if got := resp.Header.Get("Content-Type"); tt.contentType != "" && got != tt.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tt.path, got, tt.contentType)
		}
		if !strings.Contains(b.String(), tt.body) {
			t.Errorf("GET %s: body %.200q, want it to contain %q", tt.path, b.String(), tt.body)
		}
		if tt.code == http.StatusOK && tt.body == "" && b.Len() == 0 {
			t.Errorf("GET %s: empty profile", tt.path)
		}
	}
}
