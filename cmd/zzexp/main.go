package main

import (
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
)

func cpu(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

func main() {
	n := flag.Int("n", 101, "nodes")
	alg := flag.String("alg", "bully", "")
	par := flag.Int("par", 8, "spawners")
	env := flag.String("env", "", "extra env, comma sep")
	hold := flag.Duration("hold", 0, "")
	binary := flag.String("binary", "bin/node", "")
	shuffle := flag.Bool("shuffle", true, "")
	idleWin := flag.Duration("idle", 5*time.Second, "")
	flag.Parse()
	dir, _ := os.MkdirTemp("", "zzexp")
	ns, err := localcluster.StartAccountsNATS(dir, "127.0.0.1", -1, dir)
	if err != nil {
		panic(err)
	}
	defer localcluster.StopNATS(ns)
	ids := make([]uint64, *n)
	addrs := make([]string, *n)
	for i := range ids {
		ids[i] = uint64(i + 1)
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		addrs[i] = l.Addr().String()
		l.Close()
	}
	extra := localcluster.NodeEnv()
	if *env != "" {
		extra = append(extra, strings.Split(*env, ",")...)
	}
	nodes, err := localcluster.NewNodes(localcluster.Spec{Binary: *binary, NATSURL: ns.ClientURL(), Cluster: "exp", Algorithm: *alg, IDs: ids, HTTPAddrs: addrs, LogDir: filepath.Join(dir, "logs"), Env: extra})
	if err != nil {
		panic(err)
	}
	defer localcluster.StopAll(nodes, 3*time.Second)
	self0 := cpu(os.Getpid())
	start := time.Now()
	ch := make(chan *localcluster.Node)
	var wg sync.WaitGroup
	for range *par {
		wg.Go(func() {
			for nd := range ch {
				nd.Start()
			}
		})
	}
	order := append([]*localcluster.Node(nil), nodes...)
	if *shuffle {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	for _, nd := range order {
		ch <- nd
	}
	close(ch)
	wg.Wait()
	spawned := time.Since(start)
	hc := localcluster.NewHTTPClient()
	ctx := context.Background()
	var agreed time.Duration
	for time.Since(start) < 60*time.Second {
		ok := true
		for _, nd := range nodes {
			st, err := localcluster.FetchStatus(ctx, hc, nd.HTTPAddr)
			if err != nil || st.Leader == nil || *st.Leader != uint64(*n) {
				ok = false
				break
			}
		}
		if ok {
			agreed = time.Since(start)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var total int64
	var cpus []int64
	for _, nd := range nodes {
		c := cpu(nd.Pid())
		total += c
		cpus = append(cpus, c)
	}
	sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
	fmt.Printf("spawned %v agreed %v; node CPU total %.2fs (min %d max %d med %d cs); self %.2fs\n", spawned, agreed, float64(total)/100, cpus[0], cpus[len(cpus)-1], cpus[len(cpus)/2], float64(cpu(os.Getpid())-self0)/100)
	var recv, sent, drop float64
	bytype := map[string]float64{}
	for _, nd := range nodes {
		m, err := localcluster.FetchMetrics(ctx, hc, nd.HTTPAddr)
		for k, v := range m {
			if strings.HasPrefix(k, "election_messages_") {
				bytype[k] += v
			}
		}
		if err == nil {
			recv += m.Sum("election_messages_received_total")
			sent += m.Sum("election_messages_sent_total")
			drop += m.Sum("election_messages_dropped_total")
		}
	}
	fmt.Printf("received %.0f sent %.0f dropped %.0f\n", recv, sent, drop)
	for k, v := range bytype {
		if v > 0 {
			fmt.Printf("  %s %.0f\n", k, v)
		}
	}
	// announcements
	cnt := 0
	for _, nd := range nodes {
		b, _ := os.ReadFile(nd.LogPath)
		cnt += strings.Count(string(b), "announced leadership")
	}
	fmt.Println("announcements", cnt, "logs", filepath.Join(dir, "logs"))
	time.Sleep(2 * time.Second)
	var idle int64
	for _, nd := range nodes {
		idle -= cpu(nd.Pid())
	}
	time.Sleep(*idleWin)
	for _, nd := range nodes {
		idle += cpu(nd.Pid())
	}
	if *hold > 0 {
		for _, nd := range nodes {
			fmt.Println("pid", nd.ID, nd.Pid())
		}
		time.Sleep(*hold)
	}
	fmt.Printf("idle over %v: %.2f%% per node\n", *idleWin, float64(idle)/float64(*n)/idleWin.Seconds())
}
