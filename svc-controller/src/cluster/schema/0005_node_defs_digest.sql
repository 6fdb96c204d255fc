-- A digest of each node's job definitions, recorded with them: nodes with the same digest
-- define the same timer slots, so each slot can have one owner among them that offers it
-- on time (the others offer it only when the owner stops beating), instead of every node
-- offering every slot.
ALTER TABLE svc_nodes ADD COLUMN defs_digest text NOT NULL DEFAULT '';
