#!/bin/bash
# after proof9's round 5: stop proof9 (it waits on the pause file), move the proof worktree to main's HEAD, start proof10
until grep -q "round 5 done" /work/notes/proof/p12/round; do sleep 10; done
pkill -f "proof9.sh" ; sleep 2
cd /work/wt/proof && git checkout -q --detach $(git -C /work/main rev-parse HEAD) && git log --oneline -1 > /work/notes/proof/switch.log
rm -f /work/notes/proof/pause
setsid nohup /work/notes/proof/proof10.sh 1 > /work/notes/proof/proof10.out 2>&1 &
