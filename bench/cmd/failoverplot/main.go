// Command failoverplot draws crash-failover figures as an SVG with the plot
// package. cmd/bench, which lives in the main module and so cannot import
// a plotting library, writes its figures as JSON and runs it:
//
//	failoverplot -in failover.json -out docs/benchmarks.svg -caption "..."
//
// The input is a JSON list of {"name", "p50", "p90", "max"}, durations in
// nanoseconds.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/baton-election/baton/bench/plot"
)

// maxInput bounds the input file.
const maxInput = 1 << 20

type series struct {
	Name string `json:"name"`
	P50  int64  `json:"p50"`
	P90  int64  `json:"p90"`
	Max  int64  `json:"max"`
}

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "failoverplot:", err)
		os.Exit(1)
	}
}

func run(args []string, errOut io.Writer) error {
	fs := flag.NewFlagSet("failoverplot", flag.ContinueOnError)
	fs.SetOutput(errOut)
	in := fs.String("in", "", "JSON input file (required)")
	out := fs.String("out", "", "SVG output file (required)")
	caption := fs.String("caption", "", "caption under the plot: the machine and the date")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		return errors.New("usage: failoverplot -in file.json -out file.svg [-caption text]")
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInput+1))
	if err != nil {
		return err
	}
	if len(data) > maxInput {
		return fmt.Errorf("%s: larger than %d bytes", *in, maxInput)
	}
	var input []series
	if err := json.Unmarshal(data, &input); err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	out2 := make([]plot.Series, 0, len(input))
	for _, s := range input {
		out2 = append(out2, plot.Series{Name: s.Name, P50: time.Duration(s.P50), P90: time.Duration(s.P90), Max: time.Duration(s.Max)})
	}
	return plot.WriteFailover(*out, *caption, out2)
}
