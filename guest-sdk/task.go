package mandate

import (
	"encoding/json"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Task is a handle to a child task this task spawned.
type Task struct{ h abi.Handle }

// Handle is the raw handle.
func (t Task) Handle() abi.Handle { return t.h }

// Spawn starts a child task under the spawn capability sc:
//
//	child, err := mandate.Spawn(spawner, abi.SpawnRequest{
//		Module: finderDigest,
//		Input:  query.Handle(),
//		Caps: []abi.SpawnCap{{Handle: search.Handle(), Name: "search",
//			Narrow: json.RawMessage(`{"paths":["/search"]}`)}},
//		Timeout: "10s",
//	})
//	result, err := child.Wait()
//
// The child gets only what is passed, each capability derived anew (and
// narrowed when asked), starts at this task's label, and gets no more
// memory or time than this task has.
func Spawn(sc Cap, req abi.SpawnRequest) (Task, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return Task{}, err
	}
	if e := taskSpawn(uint32(sc.h), ptr(b), uint32(len(b)), &scratch); e != abi.ESUCCESS {
		return Task{}, fail(abi.TaskSpawnName, e)
	}
	return Task{abi.Handle(scratch)}, nil
}

// Wait blocks until the child ends and returns its result blob (the zero
// Blob when it set none). A child that failed, was killed or ran out of a
// limit is ECHILD.
func (t Task) Wait() (Blob, error) {
	if e := taskWait(uint32(t.h), &scratch); e != abi.ESUCCESS {
		return Blob{}, fail(abi.TaskWaitName, e)
	}
	return Blob{abi.Handle(scratch)}, nil
}

// Kill stops the child.
func (t Task) Kill() error {
	if e := taskKill(uint32(t.h)); e != abi.ESUCCESS {
		return fail(abi.TaskKillName, e)
	}
	return nil
}

// Drop removes the child's handle from this task's table (the child keeps
// running).
func (t Task) Drop() error { return drop(t.h) }
