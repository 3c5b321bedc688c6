// Command healthcheck is the health probe of the container images, which
// are built FROM scratch and so have no shell or HTTP client: it GETs one
// URL and exits 0 on 200 OK, 1 otherwise. With -print it also writes the
// body to stdout, so that a test can read a node's /status from inside a
// container that is cut off from every network.
//
//	healthcheck http://127.0.0.1:8080/healthz
//	healthcheck -print http://127.0.0.1:8080/status
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// maxBody bounds what is read of the answer.
const maxBody = 1 << 16

func main() {
	args := os.Args[1:]
	var out io.Writer = io.Discard
	if len(args) == 2 && args[0] == "-print" {
		out, args = os.Stdout, args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: healthcheck [-print] URL")
		os.Exit(2)
	}
	if err := probe(args[0], out); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// probe GETs url, copies the body to out, and fails unless the answer is
// 200 OK.
func probe(url string, out io.Writer) error {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(out, io.LimitReader(resp.Body, maxBody)); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
