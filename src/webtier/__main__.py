from webtier.cli import main

main(prog_name="webtier")
