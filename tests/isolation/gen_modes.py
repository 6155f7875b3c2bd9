# Generates specs/mode-conflicts.spec and specs/mode-waits.spec (run once; outputs are committed as specs).
modes = [("as","ACCESS SHARE"),("rs","ROW SHARE"),("re","ROW EXCLUSIVE"),
         ("sue","SHARE UPDATE EXCLUSIVE"),("sh","SHARE"),("sre","SHARE ROW EXCLUSIVE"),
         ("ex","EXCLUSIVE"),("ae","ACCESS EXCLUSIVE")]
# PostgreSQL conflict table (for choosing waits in mode-waits.spec)
conf = {
 "as":{"ae"}, "rs":{"ex","ae"}, "re":{"sh","sre","ex","ae"},
 "sue":{"sue","sh","sre","ex","ae"}, "sh":{"re","sue","sre","ex","ae"},
 "sre":{"re","sue","sh","sre","ex","ae"}, "ex":{"rs","re","sue","sh","sre","ex","ae"},
 "ae":{"as","rs","re","sue","sh","sre","ex","ae"}}
L=[]
L.append("# Full 8x8 table-lock conflict matrix, one permutation per held mode.")
L.append("# s1 holds mode X on t; s2 tries every mode Y with NOWAIT, each in its")
L.append("# own transaction that is then rolled back.")
L.append("")
L.append("setup { CREATE TABLE t (); }")
L.append("teardown { DROP TABLE t; }")
L.append("")
L.append("session s1")
for a,m in modes:
    L.append(f"step h{a} {{ BEGIN; LOCK TABLE t IN {m} MODE; }}")
L.append("step s1c { COMMIT; }")
L.append("")
L.append("session s2")
for a,m in modes:
    L.append(f"step n{a} {{ BEGIN; LOCK TABLE t IN {m} MODE NOWAIT; }}")
L.append("step s2r { ROLLBACK; }")
L.append("")
for a,_ in modes:
    L.append("permutation h"+a+" "+" ".join(f"n{b} s2r" for b,_ in modes)+" s1c")
open("specs/mode-conflicts.spec","w").write("\n".join(L)+"\n")

L=[]
L.append("# Blocking (non-NOWAIT) behaviour for every held mode: s2 asks for a")
L.append("# compatible mode (granted at once, where one exists) and then a")
L.append("# conflicting mode (waits until s1 commits).")
L.append("")
L.append("setup { CREATE TABLE t (); }")
L.append("teardown { DROP TABLE t; }")
L.append("")
L.append("session s1")
L.append("setup { BEGIN; }")
for a,m in modes:
    L.append(f"step h{a} {{ LOCK TABLE t IN {m} MODE; }}")
L.append("step s1c { COMMIT; }")
L.append("")
L.append("session s2")
L.append("setup { BEGIN; }")
for a,m in modes:
    L.append(f"step w{a} {{ LOCK TABLE t IN {m} MODE; }}")
L.append("step s2c { COMMIT; }")
L.append("")
names=[a for a,_ in modes]
for a in names:
    comp=[b for b in names if b not in conf[a]]
    # the strongest compatible mode, then the weakest conflicting mode
    c=[b for b in names if b in conf[a]][0]
    steps=["h"+a]
    if comp: steps.append("w"+comp[-1])
    steps += ["w"+c, "s1c", "s2c"]
    L.append("permutation "+" ".join(steps))
# an s2 lock held first, s1 waiting, s2 commit releases
L.append("permutation wae hsh s2c s1c")
open("specs/mode-waits.spec","w").write("\n".join(L)+"\n")
