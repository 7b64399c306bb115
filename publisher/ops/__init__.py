"""Operations commands: flush the CDC tables, the filler-table writer."""
