from vault_brain.entry import command

command()
