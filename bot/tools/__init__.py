"""The tools a turn is offered (the toolbox) and the approvals risky calls wait for."""
