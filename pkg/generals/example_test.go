package generals_test

import (
	"fmt"

	"github.com/baton-election/baton/pkg/generals"
)

// Four members, commander 0, member 3 a traitor that relays "retreat"
// whatever it received. The caller carries the messages and ends each
// round once its messages are in.
func Example() {
	const n, traitor = 4, 3
	machines := make([]*generals.Machine, n)
	for id := range n {
		mc, err := generals.New(generals.Config{Members: n, Commander: 0, Self: id, Default: "retreat"})
		if err != nil {
			panic(err)
		}
		machines[id] = mc
	}
	type envelope struct {
		from int
		msg  generals.Message
	}
	var queue []envelope
	send := func(from int, out []generals.Message) {
		for _, m := range out {
			if from == traitor {
				m.Value = "retreat"
			}
			queue = append(queue, envelope{from, m})
		}
	}
	out, err := machines[0].Issue("attack")
	if err != nil {
		panic(err)
	}
	send(0, out)
	for range machines[1].Rounds() {
		for len(queue) > 0 {
			e := queue[0]
			queue = queue[1:]
			out, err := machines[e.msg.To].Receive(e.from, e.msg)
			if err != nil {
				panic(err)
			}
			send(e.msg.To, out)
		}
		for id, mc := range machines {
			send(id, mc.EndRound())
		}
	}
	for id := 1; id < traitor; id++ {
		v, ok := machines[id].Decision()
		fmt.Println(id, v, ok)
	}
	// Output:
	// 1 attack true
	// 2 attack true
}
