-- Which process a node name belongs to (its machine and state directory), so that a
-- second process started with a live node's name is refused at join while the same
-- node's restart is not.
ALTER TABLE svc_nodes ADD COLUMN instance text NOT NULL DEFAULT '';
